// The simulator's checks, each proven by a kernel with the bug planted in it: the check must
// catch it with a message that names the kernel and where. Also: 3D grids and blocks, shared
// memory (static and dynamic), atomics, warp width, and replay of the thread order by seed.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "../backends/gpu/kernels/common.hpp"
#include "tandem/provenance.hpp"
#include "tandem/gpu/kernel_api.hpp"
#include "tandem/tandem.hpp"

namespace {

using namespace tandem;
namespace g = tandem::gpu;

// ---- kernels with planted bugs ----

// Even threads wait at one barrier, odd threads at another.
TANDEM_KERNEL void divergent_barriers(int* out) {
  const unsigned t = g::thread_rank();
  if (t % 2 == 0) {
    g::sync_threads();
  } else {
    g::sync_threads();
  }
  out[t] = 1;
}

// Threads past 16 return before a barrier the others wait at.
TANDEM_KERNEL void early_exit_before_barrier(int* out) {
  const unsigned t = g::thread_rank();
  if (t >= 16) return;
  g::sync_threads();
  out[t] = 1;
}

// Off by one: thread 0 also writes out[n].
TANDEM_KERNEL void write_past_end(int n, int* out) {
  const unsigned t = g::thread_rank();
  if (t < static_cast<unsigned>(n)) out[t] = 1;
  if (t == 0) out[n] = 7;
}

TANDEM_KERNEL void write_before_start(int* out) {
  if (g::thread_rank() == 0) out[-1] = 7;
}

// Thread 0 copies 4 floats from p + offset to p + 32 + offset through a 16-byte pack.
TANDEM_KERNEL void copy_pack(float* p, unsigned offset) {
  if (g::thread_rank() == 0) {
    tandem::gpu::kernels::store_pack(p + 32 + offset, tandem::gpu::kernels::load_pack(p + offset));
  }
}

// Each thread writes its slot, then reads its neighbour's: needs the barrier between.
TANDEM_KERNEL void rotate_through_shared(bool with_barrier, int* out) {
  TANDEM_SHARED(int, slots, [256]);
  const unsigned t = g::thread_rank(), n = g::block_threads();
  slots[t] = static_cast<int>(t) + 1;
  if (with_barrier) g::sync_threads();
  out[t] = slots[(t + 1) % n];
}

// Only the first half of the shared array is written, all of it is read.
TANDEM_KERNEL void read_unwritten_shared(float* out) {
  TANDEM_SHARED(float, s, [64]);
  const unsigned t = g::thread_rank();
  if (t < 32) s[t] = 1.0f;
  g::sync_threads();
  out[t] = s[t];
}

// Counts positive elements with one ballot per warp, keeping the mask in 32 bits: right on a
// 32-wide warp, silently wrong on a 64-wide one.
TANDEM_KERNEL void count_positive_assuming_warp32(const int* in, int* count) {
  const unsigned t = g::thread_rank();
  const auto mask = static_cast<std::uint32_t>(g::ballot(in[t] > 0));
  if (g::lane_id() == 0) g::atomic_add(count, std::popcount(mask));
}
TANDEM_KERNEL void count_positive(const int* in, int* count) {
  const unsigned t = g::thread_rank();
  const g::lane_mask mask = g::ballot(in[t] > 0);
  if (g::lane_id() == 0) g::atomic_add(count, std::popcount(mask));
}

// With a block of 48 threads and warps of 32, the second warp has 16 lanes: lane 8 and up of
// that warp read lanes that do not exist.
TANDEM_KERNEL void shuffle_from_missing_lane(int* out) {
  int v = static_cast<int>(g::thread_rank());
  v += g::shfl_down(v, 8u);
  out[g::thread_rank()] = v;
}

// Half the lanes of each warp shuffle, the other half go on to the barrier.
TANDEM_KERNEL void divergent_shuffle(int* out) {
  int v = 1;
  if (g::lane_id() < 16) v = g::shfl_down(v, 1u);
  g::sync_threads();
  out[g::thread_rank()] = v;
}

TANDEM_KERNEL void too_much_shared_memory(int* out) {
  TANDEM_SHARED(char, big, [64 * 1024]);
  big[g::thread_rank()] = 1;
  g::sync_threads();
  out[0] = big[0];
}

TANDEM_KERNEL void dynamic_shared_reverse(const int* in, int* out) {
  TANDEM_DYNAMIC_SHARED(int, s);
  const unsigned t = g::thread_rank(), n = g::block_threads();
  s[t] = in[t];
  g::sync_threads();
  out[t] = s[n - 1 - t];
}

// Every thread of a 3D grid of 3D blocks marks its global linear index.
TANDEM_KERNEL void mark_3d(int* marks) {
  const g::Dim3 b = g::block_idx(), gd = g::grid_dim();
  const unsigned block = b.x + gd.x * (b.y + gd.y * b.z);
  g::atomic_add(marks + block * g::block_threads() + g::thread_rank(), 1);
}

// Atomics on shared memory (per block) and on global memory (all blocks).
TANDEM_KERNEL void count_threads(int* total, int* per_block) {
  TANDEM_SHARED(int, local);
  if (g::thread_rank() == 0) local = 0;
  g::sync_threads();
  g::atomic_add(&local, 1);
  g::atomic_add(total, 1);
  g::sync_threads();
  if (g::thread_rank() == 0) per_block[g::block_idx().x] = local;
}

// Block 1 spins on a flag that block 0 would set, but block 0 fails first.
TANDEM_KERNEL void wait_for_failed_block(unsigned* flag, int* out) {
  if (g::block_idx().x == 0) {
    if (g::thread_rank() == 0) return;
    g::sync_threads();
    g::store_volatile(flag, 1u);
  } else {
    while (g::load_volatile(flag) == 0u) {
    }
  }
  out[0] = 1;
}

std::vector<int> iota_ints(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

Backend& sim_backend() { return get_backend("sim"); }

// f must throw E with a message containing every part.
template <class E, class F>
void expect_error(F&& f, std::initializer_list<const char*> parts) {
  std::string message;
  try {
    f();
  } catch (const E& e) {
    message = e.what();
  }
  REQUIRE_MESSAGE(!message.empty(), "no error was raised");
  for (const char* part : parts) {
    CHECK_MESSAGE(message.find(part) != std::string::npos, "the message\n  ", message, "\nlacks\n  ",
                  std::string(part));
  }
}

// GEMM cases whose exact product any GEMM must give: small integers (exact in f32, bf16 and f16,
// and so are their products and sums in f32), so any element taken from the wrong row, column
// or k-slice changes the result. check(c) runs once per size and transpose pair.
struct ExactGemm {
  std::int64_t m, n, k;
  Transpose ta, tb;
  std::vector<float> a, b;  // as stored: (ar x ac) and (br x bc)
  std::int64_t ar, ac, br, bc;
};
template <class F>
void for_each_exact_gemm(std::initializer_list<std::array<std::int64_t, 3>> sizes, F&& check) {
  for (const auto [m, n, k] : sizes) {
    for (const Transpose ta : {Transpose::no, Transpose::yes}) {
      for (const Transpose tb : {Transpose::no, Transpose::yes}) {
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(k);
        CAPTURE(ta == Transpose::yes);
        CAPTURE(tb == Transpose::yes);
        ExactGemm c{m,
                    n,
                    k,
                    ta,
                    tb,
                    std::vector<float>(std::size_t(m * k)),
                    std::vector<float>(std::size_t(k * n)),
                    ta == Transpose::no ? m : k,
                    ta == Transpose::no ? k : m,
                    tb == Transpose::no ? k : n,
                    tb == Transpose::no ? n : k};
        for (std::size_t i = 0; i < c.a.size(); ++i) c.a[i] = float(int((i * 7 + 3) % 9) - 4);
        for (std::size_t i = 0; i < c.b.size(); ++i) c.b[i] = float(int((i * 5 + 1) % 7) - 3);
        check(c);
      }
    }
  }
}

}  // namespace

TEST_SUITE("sim") {
  TEST_CASE("barrier divergence: threads at different barriers") {
    Buffer out(sim_backend(), DType::i32, 64);
    expect_error<DeviceError>(
        [&] {
          tandem::sim::launch(sim_backend(), {"divergent_barriers", {2, 1, 1}, {64, 1, 1}}, divergent_barriers,
                              static_cast<int*>(out.data()));
        },
        // Both blocks diverge and run concurrently: either may be the one reported.
        {"kernel 'divergent_barriers', block (", "barrier divergence",
         "waits at the barrier at test_sim.cpp:", "thread ("});
  }

  TEST_CASE("barrier divergence: threads exit while others wait") {
    Buffer out(sim_backend(), DType::i32, 64);
    expect_error<DeviceError>(
        [&] {
          tandem::sim::launch(sim_backend(), {"early_exit_before_barrier", {1, 1, 1}, {64, 1, 1}},
                              early_exit_before_barrier, static_cast<int*>(out.data()));
        },
        {"kernel 'early_exit_before_barrier'", "has exited while thread (", "waits at the barrier at test_sim.cpp:"});
  }

  TEST_CASE("writes past a buffer's end or before its start are caught, and the allocator keeps working") {
    Buffer out(sim_backend(), DType::i32, 100);
    expect_error<DeviceError>(
        [&] {
          tandem::sim::launch(sim_backend(), {"write_past_end", {1, 1, 1}, {128, 1, 1}}, write_past_end, 100,
                              static_cast<int*>(out.data()));
        },
        {"kernel 'write_past_end' wrote outside a buffer of 400 bytes", "byte offset 403, 4 bytes past its end"});
    expect_error<DeviceError>(
        [&] {
          tandem::sim::launch(sim_backend(), {"write_before_start", {1, 1, 1}, {32, 1, 1}}, write_before_start,
                              static_cast<int*>(out.data()));
        },
        {"kernel 'write_before_start' wrote outside a buffer", "before its start"});
    // The guard zones were restored: a correct kernel on the same buffer passes.
    tandem::sim::launch(sim_backend(), {"write_past_end", {1, 1, 1}, {128, 1, 1}}, write_past_end, 99,
                        static_cast<int*>(out.data()));
    Buffer more(sim_backend(), DType::f32, 1000);
    fill(more, 2.0);
    CHECK(sum(more) == 2000.0);
  }

  TEST_CASE("a missing barrier shows up as a wrong result (thread order is shuffled)") {
    const int n = 256;
    Buffer out(sim_backend(), DType::i32, n);
    std::vector<int> want(n);
    for (int t = 0; t < n; ++t) want[t] = (t + 1) % n + 1;
    tandem::sim::launch(sim_backend(), {"rotate_through_shared", {1, 1, 1}, {n, 1, 1}}, rotate_through_shared, true,
                        static_cast<int*>(out.data()));
    CHECK(out.to_vector<int>() == want);
    tandem::sim::launch(sim_backend(), {"rotate_through_shared", {1, 1, 1}, {n, 1, 1}}, rotate_through_shared, false,
                        static_cast<int*>(out.data()));
    const auto got = out.to_vector<int>();
    int wrong = 0;
    for (int t = 0; t < n; ++t) wrong += got[t] != want[t] ? 1 : 0;
    CHECK_MESSAGE(wrong > 0, "without the barrier every thread still read its neighbour's value");
  }

  TEST_CASE("shared memory no thread wrote reads as poison (NaN)") {
    Buffer out(sim_backend(), DType::f32, 64);
    tandem::sim::launch(sim_backend(), {"read_unwritten_shared", {1, 1, 1}, {64, 1, 1}}, read_unwritten_shared,
                        static_cast<float*>(out.data()));
    const auto v = out.to_vector<float>();
    CHECK(v[0] == 1.0f);
    CHECK(std::isnan(v[40]));
  }

  TEST_CASE("code that assumes a warp of 32 is wrong on sim64, portable code right on both") {
    const int n = 256;
    std::vector<int> in(n);
    for (int i = 0; i < n; ++i) in[i] = (i * 7) % 3 == 0 ? 1 : -1;
    const int positives = static_cast<int>(std::count(in.begin(), in.end(), 1));
    for (const char* name : {"sim", "sim64"}) {
      Backend& be = get_backend(name);
      Buffer x = Buffer::from(be, in);
      Buffer count(be, DType::i32, 1);
      fill(count, 0);
      tandem::sim::launch(be, {"count_positive", {1, 1, 1}, {n, 1, 1}}, count_positive,
                          static_cast<const int*>(x.data()), static_cast<int*>(count.data()));
      CHECK(count.to_vector<int>()[0] == positives);
      fill(count, 0);
      tandem::sim::launch(be, {"count_positive_assuming_warp32", {1, 1, 1}, {n, 1, 1}}, count_positive_assuming_warp32,
                          static_cast<const int*>(x.data()), static_cast<int*>(count.data()));
      if (tandem::sim::engine_of(be).warp_size() == 32) {
        CHECK(count.to_vector<int>()[0] == positives);
      } else {
        CHECK_MESSAGE(count.to_vector<int>()[0] != positives, "the 32-bit mask went unnoticed with a warp of 64");
      }
    }
  }

  TEST_CASE("a shuffle from a lane that does not exist") {
    Buffer out(sim_backend(), DType::i32, 48);
    expect_error<DeviceError>(
        [&] {
          tandem::sim::launch(sim_backend(), {"shuffle_from_missing_lane", {1, 1, 1}, {48, 1, 1}},
                              shuffle_from_missing_lane, static_cast<int*>(out.data()));
        },
        {"kernel 'shuffle_from_missing_lane'", "shfl_down at test_sim.cpp:", "which does not exist", "only 16 lanes"});
  }

  TEST_CASE("warp divergence: not every lane reaches the shuffle") {
    Buffer out(sim_backend(), DType::i32, 64);
    expect_error<DeviceError>(
        [&] {
          tandem::sim::launch(sim_backend(), {"divergent_shuffle", {1, 1, 1}, {64, 1, 1}}, divergent_shuffle,
                              static_cast<int*>(out.data()));
        },
        {"kernel 'divergent_shuffle'", "warp divergence", "waits at shfl_down at test_sim.cpp:"});
  }

  TEST_CASE("shared memory limits and dynamic shared memory") {
    Buffer out(sim_backend(), DType::i32, 256);
    expect_error<DeviceError>(
        [&] {
          tandem::sim::launch(sim_backend(), {"too_much_shared_memory", {1, 1, 1}, {32, 1, 1}}, too_much_shared_memory,
                              static_cast<int*>(out.data()));
        },
        {"kernel 'too_much_shared_memory'", "shared memory exhausted"});
    Buffer in = Buffer::from(sim_backend(), iota_ints(256));
    expect_error<DeviceError>(
        [&] {
          tandem::sim::launch(sim_backend(), {"dynamic_shared_reverse", {1, 1, 1}, {256, 1, 1}}, dynamic_shared_reverse,
                              static_cast<const int*>(in.data()), static_cast<int*>(out.data()));
        },
        {"launched with 0 bytes of it"});
    tandem::sim::launch(sim_backend(), {"dynamic_shared_reverse", {1, 1, 1}, {256, 1, 1}, 256 * sizeof(int)},
                        dynamic_shared_reverse, static_cast<const int*>(in.data()), static_cast<int*>(out.data()));
    const auto v = out.to_vector<int>();
    CHECK(v[0] == 255);
    CHECK(v[255] == 0);
    expect_error<DeviceError>(
        [&] {
          tandem::sim::launch(sim_backend(), {"dynamic_shared_reverse", {1, 1, 1}, {256, 1, 1}, 1 << 20},
                              dynamic_shared_reverse, static_cast<const int*>(in.data()),
                              static_cast<int*>(out.data()));
        },
        {"bytes of dynamic shared memory asked"});
  }

  TEST_CASE("bad launch configurations are errors naming the kernel") {
    Buffer out(sim_backend(), DType::i32, 1);
    expect_error<DeviceError>(
        [&] {
          tandem::sim::launch(sim_backend(), {"mark_3d", {1, 1, 1}, {2048, 1, 1}}, mark_3d,
                              static_cast<int*>(out.data()));
        },
        {"launch of kernel 'mark_3d' failed: block (2048,1,1)"});
    expect_error<DeviceError>(
        [&] {
          tandem::sim::launch(sim_backend(), {"mark_3d", {0, 1, 1}, {32, 1, 1}}, mark_3d,
                              static_cast<int*>(out.data()));
        },
        {"launch of kernel 'mark_3d' failed: grid (0,1,1)"});
  }

  TEST_CASE("3D grids of 3D blocks cover every thread once") {
    const g::Dim3 grid{2, 3, 4}, block{4, 2, 8};
    const int n = 2 * 3 * 4 * 4 * 2 * 8;
    Buffer marks(sim_backend(), DType::i32, n);
    fill(marks, 0);
    tandem::sim::launch(sim_backend(), {"mark_3d", grid, block}, mark_3d, static_cast<int*>(marks.data()));
    const auto v = marks.to_vector<int>();
    CHECK(std::count(v.begin(), v.end(), 1) == n);
  }

  TEST_CASE("atomics on shared and global memory") {
    const unsigned blocks = 37, threads = 192;
    Buffer total(sim_backend(), DType::i32, 1), per_block(sim_backend(), DType::i32, blocks);
    fill(total, 0);
    tandem::sim::launch(sim_backend(), {"count_threads", {blocks, 1, 1}, {threads, 1, 1}}, count_threads,
                        static_cast<int*>(total.data()), static_cast<int*>(per_block.data()));
    CHECK(total.to_vector<int>()[0] == static_cast<int>(blocks * threads));
    const auto v = per_block.to_vector<int>();
    CHECK(std::count(v.begin(), v.end(), static_cast<int>(threads)) == static_cast<int>(blocks));
  }

  TEST_CASE("the thread order replays from its seed") {
    auto run_with_seed = [](const char* seed) {
      setenv("TANDEM_SIM_SEED", seed, 1);
      auto be = create_backend("sim");
      unsetenv("TANDEM_SIM_SEED");
      CHECK(tandem::sim::engine_of(*be).schedule_seed() == std::strtoull(seed, nullptr, 10));
      Buffer out(*be, DType::i32, 256);
      tandem::sim::launch(*be, {"rotate_through_shared", {1, 1, 1}, {256, 1, 1}}, rotate_through_shared, false,
                          static_cast<int*>(out.data()));
      return out.to_vector<int>();
    };
    CHECK(run_with_seed("42") == run_with_seed("42"));
    CHECK(run_with_seed("42") != run_with_seed("43"));
  }

  TEST_CASE("a block waiting for a failed block ends with the first error instead of hanging") {
    Buffer flag(sim_backend(), DType::i32, 1), out(sim_backend(), DType::i32, 1);
    fill(flag, 0);
    expect_error<DeviceError>(
        [&] {
          tandem::sim::launch(sim_backend(), {"wait_for_failed_block", {2, 1, 1}, {32, 1, 1}}, wait_for_failed_block,
                              static_cast<unsigned*>(flag.data()), static_cast<int*>(out.data()));
        },
        {"kernel 'wait_for_failed_block', block (0,0,0): barrier divergence"});
  }

  TEST_CASE("engine_of rejects backends that are not simulators") {
    expect_error<InvalidArgument>([&] { tandem::sim::engine_of(get_backend("reference")); }, {"not a simulator"});
  }

  TEST_CASE("scan: with no variant named, the look-back only where hardware verified it, below 2^20 elements") {
    // The simulator runs each variant the same way every time, and the two add the tiles' prefixes
    // in different orders: the default's bits name the variant it took. The look-back waits on
    // other blocks: it is the default only while its kernel files are those of a GPU run whose
    // check passed (cmake/TandemGpuSources.cmake), else three passes at every size.
    const bool verified = tandem::gpu_kernel_provenance().lookback_verified;
    for (const std::size_t n : {std::size_t(70001), (std::size_t(1) << 20) - 1, std::size_t(1) << 20}) {
      std::vector<float> h(n);
      for (std::size_t i = 0; i < n; ++i) h[i] = static_cast<float>(std::sin(0.37 * double(i)));
      Buffer x = Buffer::from(sim_backend(), h), chosen(sim_backend(), DType::f32, n);
      Buffer lookback(sim_backend(), DType::f32, n), three(sim_backend(), DType::f32, n);
      inclusive_scan(x, chosen);
      inclusive_scan(x, lookback, {}, ScanVariant::decoupled_lookback);
      inclusive_scan(x, three, {}, ScanVariant::three_pass);
      const auto c = chosen.to_vector<float>(), l = lookback.to_vector<float>(), t = three.to_vector<float>();
      REQUIRE(l != t);  // else the bits could not tell the two apart
      CHECK_MESSAGE((verified && n < (std::size_t(1) << 20) ? c == l : c == t), "n = ", n, ", verified ", verified);
    }
  }

  TEST_CASE("device functions outside a kernel are an error, not a crash") {
    CHECK_THROWS_AS(g::thread_idx(), InvalidArgument);
  }

  TEST_CASE("variants: every one listed runs, one the backend lacks is Unsupported, an unknown name is refused") {
    CHECK(sim_backend().reduce_variants().size() == 3);
    CHECK(sim_backend().scan_variants().size() == 3);
    Buffer x = Buffer::from(sim_backend(), iota_ints(5000)), r(sim_backend(), DType::i32, 1);
    for (const ReduceVariant v : sim_backend().reduce_variants()) {
      reduce(ReduceOp::sum, x, r, {}, v);
      CHECK(r.to_vector<int>()[0] == 5000 * 4999 / 2);
    }
    expect_error<Unsupported>([&] { reduce(ReduceOp::sum, x, r, {}, ReduceVariant::vendor); },
                              {"has no variant 'vendor'; it has: single_pass, warp_shuffle, shared_tree"});
    expect_error<Unsupported>([&] { inclusive_scan(x, x, {}, ScanVariant::vendor); }, {"decoupled_lookback"});
    Buffer on_cpu = Buffer::from(get_backend("reference"), iota_ints(3)), rc(get_backend("reference"), DType::i32, 1);
    expect_error<Unsupported>([&] { reduce(ReduceOp::sum, on_cpu, rc, {}, ReduceVariant::single_pass); },
                              {"one way only"});
    // The names, at the edges (CLI, Python): one table both ways.
    for (const ReduceVariant v : sim_backend().reduce_variants()) CHECK(parse_reduce_variant(name_of(v)) == v);
    for (const ScanVariant v : sim_backend().scan_variants()) CHECK(parse_scan_variant(name_of(v)) == v);
    CHECK(parse_scan_variant("") == ScanVariant::automatic);
    CHECK(parse_scan_variant("auto") == ScanVariant::automatic);
    CHECK(parse_reduce_variant("cub") == ReduceVariant::vendor);
    CHECK(parse_scan_variant("rocprim") == ScanVariant::vendor);
    expect_error<InvalidArgument>([&] { parse_reduce_variant("atomics"); },
                                  {"unknown reduce variant 'atomics'", "single_pass, warp_shuffle, shared_tree, vendor"});
  }

  TEST_CASE("tensor_core: mma fragments give the exact product of small integers, every transpose and edge") {
    // Small integers are exact in bf16 and f16, and so are their products and sums in f32: any
    // element of a fragment read from the wrong row, column or lane changes the result.
    for (DType t : {DType::bf16, DType::f16}) {
      CAPTURE(name_of(t));
      for_each_exact_gemm(
          {{16, 8, 16}, {64, 64, 32}, {37, 70, 45}, {130, 9, 17}, {256, 136, 72}}, [&](const ExactGemm& e) {
            auto on = [&](Backend& be, const std::vector<float>& v, std::int64_t r, std::int64_t c) {
              Buffer f = Buffer::from(be, v), h(be, t, v.size());
              convert(f, h);
              return matrix(h, r, c);
            };
            Backend& sim = sim_backend();
            Matrix c = matrix(Buffer(sim, DType::f32, std::size_t(e.m * e.n)), e.m, e.n);
            c.buffer.fill(5);  // beta = 0: never read
            matmul(on(sim, e.a, e.ar, e.ac), on(sim, e.b, e.br, e.bc), c,
                   {.trans_a = e.ta, .trans_b = e.tb, .tier = MatmulTier::tensor_core});
            Backend& ref = get_backend("reference");
            Matrix want = matrix(Buffer(ref, DType::f32, std::size_t(e.m * e.n)), e.m, e.n);
            matmul(on(ref, e.a, e.ar, e.ac), on(ref, e.b, e.br, e.bc), want, {.trans_a = e.ta, .trans_b = e.tb});
            CHECK(c.buffer.to_vector<float>() == want.buffer.to_vector<float>());
          });
    }
    // alpha and beta in the epilogue.
    Backend& sim = sim_backend();
    Buffer a16(sim, DType::bf16, 16 * 16), b16(sim, DType::bf16, 16 * 8);
    a16.fill(1);
    b16.fill(2);
    Matrix c = matrix(Buffer(sim, DType::f32, 16 * 8), 16, 8);
    c.buffer.fill(1);
    matmul(matrix(a16, 16, 16), matrix(b16, 16, 8), c, {.alpha = 0.5, .beta = 3, .tier = MatmulTier::tensor_core});
    for (float v : c.buffer.to_vector<float>()) CHECK(v == 0.5f * 32 + 3);
  }

  TEST_CASE("tensor_core: offered for f16 and bf16 on 32-lane warps only") {
    auto has = [](Backend& be, DType t) {
      const auto tiers = be.matmul_tiers(t);
      return std::find(tiers.begin(), tiers.end(), MatmulTier::tensor_core) != tiers.end();
    };
    CHECK(has(sim_backend(), DType::bf16));
    CHECK(has(sim_backend(), DType::f16));
    CHECK_FALSE(has(sim_backend(), DType::f32));
    Backend& sim64 = get_backend("sim64");
    CHECK_FALSE(has(sim64, DType::bf16));
    Buffer a(sim64, DType::bf16, 256), b(sim64, DType::bf16, 256);
    a.fill(1);
    b.fill(1);
    Matrix c = matrix(Buffer(sim64, DType::f32, 256), 16, 16);
    expect_error<Unsupported>(
        [&] { matmul(matrix(a, 16, 16), matrix(b, 16, 16), c, {.tier = MatmulTier::tensor_core}); },
        {"has no tier 'tensor_core'", "register_blocked"});
    Buffer f(sim_backend(), DType::f32, 256);
    f.fill(1);
    Matrix cf = matrix(Buffer(sim_backend(), DType::f32, 256), 16, 16);
    expect_error<Unsupported>(
        [&] { matmul(matrix(f, 16, 16), matrix(f, 16, 16), cf, {.tier = MatmulTier::tensor_core}); },
        {"has no tier 'tensor_core' for f32"});
    expect_error<InvalidArgument>([&] { matmul(matrix(a, 16, 16), matrix(b, 16, 16), c, {.tf32 = true}); },
                                  {"tf32 applies to f32 inputs"});
  }

  TEST_CASE(
      "register_blocked: both block tiles (TANDEM_GPU_GEMM_TILE) give the exact product, every transpose and "
      "edge") {
    // Sizes: whole tiles of both shapes, and edges in every dimension with leading dimensions
    // that rule out the 4-wide loads.
    Backend& sim = sim_backend();
    Backend& ref = get_backend("reference");
    struct Unset {
      ~Unset() { ::unsetenv("TANDEM_GPU_GEMM_TILE"); }
    } unset;  // also when a check throws
    for (const char* tile : {"64", "128"}) {
      ::setenv("TANDEM_GPU_GEMM_TILE", tile, 1);
      CAPTURE(tile);
      for_each_exact_gemm({{256, 128, 32}, {130, 197, 37}, {129, 64, 9}}, [&](const ExactGemm& e) {
        const MatmulOptions o{.trans_a = e.ta, .trans_b = e.tb, .alpha = 2, .beta = 3};
        Matrix c = matrix(Buffer(sim, DType::f32, std::size_t(e.m * e.n)), e.m, e.n);
        c.buffer.fill(1);
        MatmulOptions on_sim = o;
        on_sim.tier = MatmulTier::register_blocked;
        matmul(matrix(Buffer::from(sim, e.a), e.ar, e.ac), matrix(Buffer::from(sim, e.b), e.br, e.bc), c, on_sim);
        Matrix want = matrix(Buffer(ref, DType::f32, std::size_t(e.m * e.n)), e.m, e.n);
        want.buffer.fill(1);
        matmul(matrix(Buffer::from(ref, e.a), e.ar, e.ac), matrix(Buffer::from(ref, e.b), e.br, e.bc), want, o);
        CHECK(c.buffer.to_vector<float>() == want.buffer.to_vector<float>());
      });
    }
    ::setenv("TANDEM_GPU_GEMM_TILE", "96", 1);
    Buffer x(sim, DType::f32, 64);
    x.fill(1);
    Matrix c = matrix(Buffer(sim, DType::f32, 64), 8, 8);
    expect_error<InvalidArgument>(
        [&] { matmul(matrix(x, 8, 8), matrix(x, 8, 8), c, {.tier = MatmulTier::register_blocked}); },
        {"TANDEM_GPU_GEMM_TILE", "auto, 64 or 128"});
  }

  TEST_CASE("a 16-byte or 32-bit access at a misaligned address is an error, as on a GPU") {
    Buffer x(sim_backend(), DType::f32, 64);
    x.fill(1);
    auto* p = static_cast<float*>(x.data());
    tandem::sim::launch(sim_backend(), {"aligned_pack", {1, 1, 1}, {32, 1, 1}}, copy_pack, p, 0u);
    expect_error<DeviceError>(
        [&] {
          tandem::sim::launch(sim_backend(), {"misaligned_pack", {1, 1, 1}, {32, 1, 1}}, copy_pack, p, 1u);
        },
        {"kernel 'misaligned_pack'", "load_pack of 16 bytes at an address 4 bytes past a multiple of 16"});
  }
}
