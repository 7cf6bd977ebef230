// Buffer::wrap and DLPack exchange on the backend under test (registered per backend with the
// matrix): ops on wrapped memory, who frees what and when, and the refusals.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "support.hpp"
#include "tandem/tandem.hpp"
#if defined(TANDEM_TEST_HAVE_DLPACK)
#include "tandem/dlpack.hpp"
#endif

namespace {

using namespace tandem;

Backend* backend_or_skip() {
  try {
    return &get_backend(test::backend_under_test());
  } catch (const BackendUnavailable& e) {
    std::printf("SKIPPED: %s\n", e.what());
    return nullptr;
  }
}

std::vector<float> iota(std::size_t n, float start) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

// A shared_ptr<void> whose release sets *released: stands for the memory's owner.
std::shared_ptr<void> owner_flag(bool& released) {
  return {static_cast<void*>(&released), [](void* p) { *static_cast<bool*>(p) = true; }};
}

}  // namespace

TEST_CASE("wrap: ops run on memory of the backend's device that tandem did not allocate") {
  Backend* be = backend_or_skip();
  if (be == nullptr) return;
  const std::size_t n = 1000;
  // Device memory of this backend, owned elsewhere (here: by buffers the test holds).
  Buffer x_mem = Buffer::from(*be, iota(n, 1));
  Buffer out_mem(*be, DType::f32, n);
  bool released = false;
  {
    Buffer x = Buffer::wrap(*be, x_mem.data(), DType::f32, n, owner_flag(released));
    Buffer out = Buffer::wrap(*be, out_mem.data(), DType::f32, n);
    CHECK(x.is_wrapped());
    CHECK_FALSE(x_mem.is_wrapped());
    add(x, x, out);
    const auto got = out_mem.to_vector<float>();
    for (std::size_t i = 0; i < n; i += 97) CHECK(got[i] == doctest::Approx(2.0 * (i + 1)));
    Buffer view = x.slice(10, 5);
    x = Buffer();
    CHECK_FALSE(released);  // the slice still shares the memory
    CHECK(view.to_vector<float>()[0] == 11.0f);
  }
  CHECK(released);                             // the owner goes with the last handle ...
  CHECK(x_mem.to_vector<float>()[0] == 1.0f);  // ... and tandem freed nothing of its memory
}

TEST_CASE("wrap: host memory on a backend that addresses the host") {
  Backend* be = backend_or_skip();
  if (be == nullptr) return;
  if (be->memory_place().kind != MemoryPlace::Kind::host) {
    std::printf("SKIPPED: %s keeps its buffers in %s, not in host memory\n", be->name().c_str(),
                describe(be->memory_place()).c_str());
    return;
  }
  auto host = std::make_shared<std::vector<double>>(513);
  std::iota(host->begin(), host->end(), 0.0);
  Buffer x = Buffer::wrap(*be, host->data(), DType::f64, host->size(), host);
  std::weak_ptr<std::vector<double>> watch = host;
  host.reset();
  CHECK_FALSE(watch.expired());  // kept alive by the buffer
  CHECK(sum(x) == doctest::Approx(512.0 * 513 / 2));
  scale(2.0, x, x);
  CHECK(watch.lock()->at(100) == 200.0);  // written in place
  x = Buffer();
  CHECK(watch.expired());
}

TEST_CASE("wrap: null and misaligned pointers are refused") {
  Backend* be = backend_or_skip();
  if (be == nullptr) return;
  CHECK_THROWS_AS(Buffer::wrap(*be, nullptr, DType::f32, 4), InvalidArgument);
  CHECK(Buffer::wrap(*be, nullptr, DType::f32, 0).size() == 0);
  alignas(8) static unsigned char raw[64];
  CHECK_THROWS_WITH_AS(Buffer::wrap(*be, raw + 2, DType::f32, 4), doctest::Contains("aligned"), InvalidArgument);
}

#if defined(TANDEM_TEST_HAVE_DLPACK)
namespace {
int g_deleted = 0;
void counting_deleter(DLManagedTensor* t) {
  ++g_deleted;
  delete[] static_cast<float*>(t->dl_tensor.data);
  delete[] t->dl_tensor.shape;
  delete t;
}
// A producer's host tensor of rows x cols floats 0, 1, 2, ... whose deleter counts.
DLManagedTensor* host_tensor(std::int64_t rows, std::int64_t cols) {
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
}  // namespace

TEST_CASE("dlpack: a buffer exported and imported again is the same memory, freed once") {
  Backend* be = backend_or_skip();
  if (be == nullptr) return;
  if (be->memory_place().kind == MemoryPlace::Kind::other) {
    CHECK_THROWS_AS(to_dlpack(Buffer(*be, DType::f32, 4)), Unsupported);
    std::printf("SKIPPED: %s keeps its buffers in memory DLPack cannot name\n", be->name().c_str());
    return;
  }
  const std::size_t in_use = be->memory_stats().bytes_in_use;
  Buffer original = Buffer::from(*be, iota(12, 0));
  const void* data = original.data();
  DLManagedTensor* t = to_dlpack(Tensor{original, {3, 4}});
  CHECK(t->dl_tensor.data == data);
  CHECK(t->dl_tensor.ndim == 2);
  CHECK(t->dl_tensor.shape[1] == 4);
  CHECK(t->dl_tensor.strides == nullptr);
  CHECK(t->dl_tensor.dtype.bits == 32);
  CHECK(addresses(*be, t->dl_tensor.device));
  original = Buffer();  // the export keeps the memory
  Tensor back = from_dlpack(*be, t);
  CHECK(back.buffer.data() == data);
  CHECK(back.shape == std::vector<std::int64_t>{3, 4});
  CHECK(back.buffer.to_vector<float>()[11] == 11.0f);
  CHECK_THROWS_AS(to_dlpack(Tensor{back.buffer, {5, 2}}), ShapeMismatch);
  back = Tensor{};  // the import's deleter frees the export, which lets go of the buffer
  CHECK(be->memory_stats().bytes_in_use == in_use);
  DLManagedTensor* scalar = to_dlpack(Tensor{Buffer::from(*be, iota(1, 5)), {}});  // 0-d
  CHECK(scalar->dl_tensor.ndim == 0);
  CHECK(be->memory_stats().bytes_in_use > in_use);
  scalar->deleter(scalar);  // a receiver that lets go without importing
  CHECK(be->memory_stats().bytes_in_use == in_use);
}

TEST_CASE("dlpack: a producer's host tensor is used in place and handed back when the last handle goes") {
  Backend* be = backend_or_skip();
  if (be == nullptr) return;
  g_deleted = 0;
  DLManagedTensor* t = host_tensor(4, 8);
  if (!addresses(*be, t->dl_tensor.device)) {
    CHECK_THROWS_WITH_AS(from_dlpack(*be, t), doctest::Contains("cannot address"), InvalidArgument);
    CHECK(g_deleted == 0);  // refused: still the caller's
    t->deleter(t);
    std::printf("SKIPPED: %s does not address host memory (the refusal was checked)\n", be->name().c_str());
    return;
  }
  Tensor in = from_dlpack(*be, t);
  CHECK(in.shape == std::vector<std::int64_t>{4, 8});
  Buffer out(*be, DType::f32, 32);
  add(in.buffer, in.buffer, out);
  CHECK(out.to_vector<float>()[31] == 62.0f);
  Buffer alias = in.buffer;
  in = Tensor{};
  CHECK(g_deleted == 0);
  alias = Buffer();
  CHECK(g_deleted == 1);
}

TEST_CASE("dlpack: strided, odd-typed and foreign tensors are refused and stay the caller's") {
  Backend* be = backend_or_skip();
  if (be == nullptr) return;
  g_deleted = 0;
  DLManagedTensor* t = host_tensor(4, 8);
  if (!addresses(*be, t->dl_tensor.device)) {
    t->deleter(t);
    std::printf("SKIPPED: %s does not address host memory\n", be->name().c_str());
    return;
  }
  std::int64_t strides[] = {1, 4};  // column-major
  t->dl_tensor.strides = strides;
  CHECK_THROWS_WITH_AS(from_dlpack(*be, t), doctest::Contains("not compact row-major"), InvalidArgument);
  std::int64_t row_major[] = {8, 1};
  t->dl_tensor.strides = row_major;  // explicit strides of the compact layout are fine
  CHECK(from_dlpack(*be, t).buffer.size() == 32);
  CHECK(g_deleted == 1);
  t = host_tensor(2, 2);
  t->dl_tensor.dtype = {kDLUInt, 8, 1};
  CHECK_THROWS_WITH_AS(from_dlpack(*be, t), doctest::Contains("uint8"), DTypeMismatch);
  t->dl_tensor.dtype = {kDLFloat, 32, 1};
  void* data = t->dl_tensor.data;
  t->dl_tensor.data = nullptr;  // refused after the other checks, still before adoption
  CHECK_THROWS_WITH_AS(from_dlpack(*be, t), doctest::Contains("null data"), InvalidArgument);
  t->dl_tensor.data = data;
  if (be->memory_place().kind == MemoryPlace::Kind::host) {
    for (DLDeviceType gpu_side : {kDLCUDA, kDLCUDAHost, kDLCUDAManaged, kDLROCMHost}) {
      t->dl_tensor.device = {gpu_side, 0};  // memory a GPU queue may still be writing
      CHECK_THROWS_WITH_AS(from_dlpack(*be, t), doctest::Contains("cannot address"), InvalidArgument);
    }
  }
  CHECK(g_deleted == 1);
  t->deleter(t);
}
#endif
