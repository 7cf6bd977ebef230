// Kernels of one's own (tandem/kernels.hpp) on the backend under test: the kernels of
// tests/user_kernels.cpp, compiled for the host and for cuda and hip where tandem has them, give
// what the host computes; a launch the backend cannot run is refused with the fix named.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "support.hpp"
#include "tandem/kernels.hpp"
#include "tandem/tandem.hpp"

TANDEM_IMPORT(block_scan,
              void(tandem::Backend&, const tandem::Buffer&, tandem::Buffer&, tandem::Buffer&, tandem::Buffer&));
TANDEM_IMPORT(transpose_tiled, void(tandem::Backend&, unsigned, unsigned, const tandem::Buffer&, tandem::Buffer&));
TANDEM_IMPORT(affine, void(tandem::Backend&, const tandem::Buffer&, tandem::Buffer&));
TANDEM_IMPORT(sum_of, double(tandem::Backend&, const tandem::Buffer&, std::size_t));
TANDEM_IMPORT(smallest, float(tandem::Backend&, const tandem::Buffer&));
TANDEM_IMPORT(largest, float(tandem::Backend&, const tandem::Buffer&));

namespace tandem::test {
const detail::Imported<void(Backend&, int)>& block_scan_with_another_signature();
}

namespace {

using namespace tandem;
using test::backend_or_skip;

// Small integers: every sum and scan below is exact in float, so results compare equal.
std::vector<float> integers(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = float(int((i * 7919) % 23) - 11);
  return v;
}

// The backend under test, or nullptr after SKIPPED where no compilation of the kernels can run on
// it: memory tandem cannot name (a GPU Kokkos), or the host's without the simulator, whose fibers
// run host-compiled kernels (the GPU machine's build compiles them for cuda alone).
Backend* kernel_backend_or_skip() {
  Backend* be = backend_or_skip();
  if (be == nullptr) return nullptr;
  if (be->memory_place().kind == MemoryPlace::Kind::other) {
    std::printf("SKIPPED: %s keeps its buffers where no user kernel runs\n", be->name().c_str());
    return nullptr;
  }
#ifndef TANDEM_TEST_HAVE_SIM
  if (kernel_target(*be) == KernelTarget::host) {
    std::printf("SKIPPED: this build has no simulator, which runs user kernels on the host backends\n");
    return nullptr;
  }
#endif
  return be;
}

#ifdef TANDEM_TEST_HAVE_SIM  // host-compiled kernels run through the simulator's fibers
TANDEM_KERNEL void count_kernel(unsigned n, int* counter) {
  const unsigned i = gpu::block_idx().x * gpu::block_dim().x + gpu::thread_idx().x;
  if (i < n) gpu::atomic_add(counter, 1);
}

TANDEM_KERNEL void launching_kernel(Backend* be, int* counter) {
  launch(*be, {"count", {1}, {1}}, count_kernel, 1u, counter);  // refused: it would wait for itself
}

TANDEM_KERNEL void throwing_kernel(int* unused) {
  (void)unused;
  if (gpu::block_idx().x == 3 && gpu::thread_idx().x == 5) throw std::runtime_error("block 3 refuses");
}
#endif

}  // namespace

TEST_CASE("user kernels: shared memory, barriers, ballots and atomics give the host's results") {
  Backend* be = kernel_backend_or_skip();
  if (!be) return;
  REQUIRE(block_scan.compiled_for(*be));
  for (const std::size_t n : {std::size_t(1), std::size_t(255), std::size_t(256), std::size_t(70001)}) {
    CAPTURE(n);
    const std::vector<float> x = integers(n);
    const Buffer bx = Buffer::from(*be, x);
    Buffer out(*be, DType::f32, n), total(*be, DType::f32, 1), positives(*be, DType::i32, 1);
    total.fill(0);
    positives.fill(0);
    block_scan(*be, bx, out, total, positives);
    std::vector<float> want(n);
    float running = 0, all = 0;
    int pos = 0;
    for (std::size_t i = 0; i < n; ++i) {
      running = i % 256 == 0 ? x[i] : running + x[i];
      want[i] = running;
      all += x[i];
      pos += x[i] > 0 ? 1 : 0;
    }
    CHECK(out.to_vector<float>() == want);
    CHECK(total.to_vector<float>()[0] == all);
    CHECK(positives.to_vector<std::int32_t>()[0] == pos);
  }
}

TEST_CASE("user kernels: 2D grids and blocks") {
  Backend* be = kernel_backend_or_skip();
  if (!be) return;
  const unsigned rows = 37, cols = 50;
  const std::vector<float> a = integers(rows * cols);
  Buffer out(*be, DType::f32, rows * cols);
  transpose_tiled(*be, rows, cols, Buffer::from(*be, a), out);
  const std::vector<float> got = out.to_vector<float>();
  bool same = true;
  for (unsigned r = 0; r < rows; ++r) {
    for (unsigned c = 0; c < cols; ++c) same = same && got[c * rows + r] == a[r * cols + c];
  }
  CHECK(same);
}

TEST_CASE("user kernels: parallel_for and parallel_reduce") {
  Backend* be = kernel_backend_or_skip();
  if (!be) return;
  const std::size_t n = 1000003;
  const std::vector<float> x = integers(n);
  const Buffer bx = Buffer::from(*be, x);
  Buffer out(*be, DType::f32, n);
  affine(*be, bx, out);
  const std::vector<float> got = out.to_vector<float>();
  double want = 0;
  bool same = true;
  for (std::size_t i = 0; i < n; ++i) {
    same = same && got[i] == 3 * x[i] + 1;
    want += x[i];
  }
  CHECK(same);
  CHECK(sum_of(*be, bx, n) == want);
  CHECK(sum_of(*be, bx, 0) == 0.0);  // no items: the identity
  CHECK(smallest(*be, bx) == -11.0f);
  CHECK(largest(*be, bx) == 11.0f);
}

#ifdef TANDEM_TEST_HAVE_SIM
TEST_CASE("user kernels: a launch compiled in this file runs on the host backends and is refused elsewhere") {
  Backend* be = kernel_backend_or_skip();
  if (!be) return;
  Buffer counter(*be, DType::i32, 1);
  counter.fill(0);
  const auto launch_count = [&] {
    launch(*be, {"count", {40}, {128}}, count_kernel, 5000u, static_cast<int*>(counter.data()));
  };
  if (kernel_target(*be) != KernelTarget::host) {
    CHECK_THROWS_WITH_AS(launch_count(), doctest::Contains("compile the source for it too"), InvalidArgument);
    return;
  }
  launch_count();
  CHECK(counter.to_vector<std::int32_t>()[0] == 5000);
  // What a kernel thread throws reaches the caller, and a grid that no GPU takes is refused.
  CHECK_THROWS_AS(launch(*be, {"throwing", {8}, {32}}, throwing_kernel, static_cast<int*>(counter.data())), Error);
  CHECK_THROWS_WITH_AS(launch(*be, {"count", {1}, {2048}}, count_kernel, 1u, static_cast<int*>(counter.data())),
                       doctest::Contains("1024"), DeviceError);
  CHECK_THROWS_WITH_AS(launch(*be, {"launching", {2}, {4}}, launching_kernel, be, static_cast<int*>(counter.data())),
                       doctest::Contains("from inside a kernel"), InvalidArgument);
  // The backend runs the next launch as if nothing had failed.
  counter.fill(0);
  launch_count();
  CHECK(counter.to_vector<std::int32_t>()[0] == 5000);
}
#endif

#ifdef TANDEM_TEST_HAVE_SIM
// An import called from a static initializer, which may run before the kernels file's own (this
// file's objects are linked first): the exports are made at compile time, so it finds them.
const double sum_before_main = [] {
  const std::vector<float> x{1, 2, 3, 4};
  return sum_of(get_backend("reference"), Buffer::from(get_backend("reference"), x), x.size());
}();

TEST_CASE("user kernels: an import works from a static initializer") { CHECK(sum_before_main == 10.0); }
#endif

TEST_CASE("user kernels: an import that does not match what was compiled is refused") {
  Backend* be = kernel_backend_or_skip();
  if (!be) return;
  const detail::Imported<void(Backend&)> missing{"missing", nullptr, nullptr, nullptr};
  CHECK_FALSE(missing.compiled_for(*be));
  CHECK_THROWS_WITH_AS(missing(*be), doctest::Contains("missing was not compiled for"), InvalidArgument);
  // block_scan's compilations, declared with another signature (test_kernels_mismatch.cpp).
  CHECK_THROWS_WITH_AS(test::block_scan_with_another_signature()(*be, 1), doctest::Contains("another signature"),
                       InvalidArgument);
}
