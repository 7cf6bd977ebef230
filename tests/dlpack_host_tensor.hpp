// A producer's DLPack tensor in host memory whose deleter counts, for the DLPack tests
// (test_wrap.cpp, test_host_memory.cpp).
#pragma once

#include <cstdint>
#include <numeric>

#include "tandem/dlpack.hpp"

namespace tandem::test {

inline int g_deleted = 0;  // tensors host_tensor made that their deleter freed
inline void counting_deleter(DLManagedTensor* t) {
  ++g_deleted;
  delete[] static_cast<float*>(t->dl_tensor.data);
  delete[] t->dl_tensor.shape;
  delete t;
}
// rows x cols floats 0, 1, 2, ...
inline DLManagedTensor* host_tensor(std::int64_t rows, std::int64_t cols) {
  auto* t = new DLManagedTensor{};
  auto* data = new float[static_cast<std::size_t>(rows * cols)];
  std::iota(data, data + rows * cols, 0.0f);
  t->dl_tensor.data = data;
  t->dl_tensor.device = {kDLCPU, 0};
  t->dl_tensor.ndim = 2;
  t->dl_tensor.dtype = {kDLFloat, 32, 1};
  t->dl_tensor.shape = new std::int64_t[2]{rows, cols};
  t->deleter = counting_deleter;
  return t;
}

}  // namespace tandem::test
