// Buffer::wrap and DLPack exchange on the backend under test (registered per backend with the
// matrix): ops on wrapped memory, who frees what and when, and the refusals. What only a backend
// that addresses host memory can do is in test_host_memory.cpp.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "support.hpp"
#include "tandem/tandem.hpp"
#if defined(TANDEM_TEST_HAVE_DLPACK)
#include "dlpack_host_tensor.hpp"
#include "tandem/dlpack.hpp"
#endif

namespace {

using namespace tandem;

using test::backend_or_skip;

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

TEST_CASE("wrap: null and misaligned pointers are refused") {
  Backend* be = backend_or_skip();
  if (be == nullptr) return;
  CHECK_THROWS_AS(Buffer::wrap(*be, nullptr, DType::f32, 4), InvalidArgument);
  CHECK(Buffer::wrap(*be, nullptr, DType::f32, 0).size() == 0);
  alignas(8) static unsigned char raw[64];
  CHECK_THROWS_WITH_AS(Buffer::wrap(*be, raw + 2, DType::f32, 4), doctest::Contains("aligned"), InvalidArgument);
}

#if defined(TANDEM_TEST_HAVE_DLPACK)
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

TEST_CASE("dlpack: a tensor in memory the backend cannot address is refused and stays the caller's") {
  Backend* be = backend_or_skip();
  if (be == nullptr) return;
  test::g_deleted = 0;
  DLManagedTensor* t = test::host_tensor(4, 8);
  // Host memory for a device backend; for a backend on the host, a GPU's memory (never touched).
  if (addresses(*be, t->dl_tensor.device)) t->dl_tensor.device = {kDLCUDA, 0};
  REQUIRE_FALSE(addresses(*be, t->dl_tensor.device));
  CHECK_THROWS_WITH_AS(from_dlpack(*be, t), doctest::Contains("cannot address"), InvalidArgument);
  CHECK(test::g_deleted == 0);  // refused: still the caller's
  t->deleter(t);
  CHECK(test::g_deleted == 1);
}
#endif
