// What only a backend that addresses host memory does with it: Buffer::wrap of a host array and
// DLPack tensors of a host producer used in place. Registered per backend like the matrix, for
// the backends whose buffers are host memory (tests/CMakeLists.txt leaves out cuda and hip: the
// refusals there are in test_wrap.cpp).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "ml_support.hpp"
#include "tandem/tandem.hpp"
#if defined(TANDEM_TEST_HAVE_DLPACK)
#include "dlpack_host_tensor.hpp"
#include "tandem/dlpack.hpp"
#endif

using namespace tandem;
using test::backend_or_skip;

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

#if defined(TANDEM_TEST_HAVE_DLPACK)
namespace {
// A fresh 4 x 8 host tensor (test::g_deleted reset), or nullptr after SKIPPED where the backend
// does not address host memory.
DLManagedTensor* host_tensor_or_skip(Backend& be) {
  test::g_deleted = 0;
  DLManagedTensor* t = test::host_tensor(4, 8);
  if (addresses(be, t->dl_tensor.device)) return t;
  t->deleter(t);
  std::printf("SKIPPED: %s does not address host memory\n", be.name().c_str());
  return nullptr;
}
}  // namespace

TEST_CASE("dlpack: a producer's host tensor is used in place and handed back when the last handle goes") {
  Backend* be = backend_or_skip();
  DLManagedTensor* t = be == nullptr ? nullptr : host_tensor_or_skip(*be);
  if (t == nullptr) return;
  Tensor in = from_dlpack(*be, t);
  CHECK(in.shape == std::vector<std::int64_t>{4, 8});
  Buffer out(*be, DType::f32, 32);
  add(in.buffer, in.buffer, out);
  CHECK(out.to_vector<float>()[31] == 62.0f);
  Buffer alias = in.buffer;
  in = Tensor{};
  CHECK(test::g_deleted == 0);
  alias = Buffer();
  CHECK(test::g_deleted == 1);
}

TEST_CASE("dlpack: strided, odd-typed and foreign tensors are refused and stay the caller's") {
  Backend* be = backend_or_skip();
  DLManagedTensor* t = be == nullptr ? nullptr : host_tensor_or_skip(*be);
  if (t == nullptr) return;
  std::int64_t strides[] = {1, 4};  // column-major
  t->dl_tensor.strides = strides;
  CHECK_THROWS_WITH_AS(from_dlpack(*be, t), doctest::Contains("not compact row-major"), InvalidArgument);
  std::int64_t row_major[] = {8, 1};
  t->dl_tensor.strides = row_major;  // explicit strides of the compact layout are fine
  CHECK(from_dlpack(*be, t).buffer.size() == 32);
  CHECK(test::g_deleted == 1);
  t = test::host_tensor(2, 2);
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
    // A device type outside DLPack's enum, as a C producer may store it (the fuzzer's finding:
    // loaded as the enum it was undefined behaviour): named by its number, refused.
    const std::int32_t foreign = 255;
    std::memcpy(&t->dl_tensor.device.device_type, &foreign, sizeof foreign);
    CHECK_THROWS_WITH_AS(from_dlpack(*be, t), doctest::Contains("DLPack device type 255"), InvalidArgument);
    t->dl_tensor.device = {kDLCPU, 0};
    // An offset that wraps the address space (the fuzzer's second finding): refused, not wrapped.
    t->dl_tensor.byte_offset = ~std::uint64_t(0) - 4095;
    CHECK_THROWS_WITH_AS(from_dlpack(*be, t), doctest::Contains("past the end of the address space"), InvalidArgument);
    t->dl_tensor.byte_offset = 0;
  }
  CHECK(test::g_deleted == 1);
  t->deleter(t);
}

TEST_CASE("dlpack: a shape whose element count overflows is refused, never read as a smaller one") {
  Backend* be = backend_or_skip();
  DLManagedTensor* t = be == nullptr ? nullptr : host_tensor_or_skip(*be);
  if (t == nullptr) return;
  const std::int64_t rows = t->dl_tensor.shape[0], cols = t->dl_tensor.shape[1];
  // (2^32, 2^32) multiplies to 2^64, which wrapped to a 0-element buffer over 32 floats.
  t->dl_tensor.shape[0] = t->dl_tensor.shape[1] = std::int64_t(1) << 32;
  CHECK_THROWS_WITH_AS(from_dlpack(*be, t), doctest::Contains("holds more elements than 64 bits count"),
                       InvalidArgument);
  t->dl_tensor.shape[0] = rows;
  t->dl_tensor.shape[1] = cols;
  t->deleter(t);
  // Exported: (2^62 + 1, 4) wrapped to 4 elements and was handed out over a 4-element buffer.
  Buffer four = Buffer::from(*be, std::vector<float>{1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(to_dlpack(Tensor{four, {(std::int64_t(1) << 62) + 1, 4}}), doctest::Contains("64 bits"),
                       ShapeMismatch);
  DLManagedTensor* empty = to_dlpack(Tensor{Buffer(*be, DType::f32, 0), {std::int64_t(1) << 62, 8, 0}});
  CHECK(empty->dl_tensor.ndim == 3);  // a zero extent makes 0 elements, whatever the others
  empty->deleter(empty);
}
#endif
