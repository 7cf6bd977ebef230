// The CPU's multiply-add roof, measured: GFLOP/s of independent multiply-adds (fused on AVX2 and
// AVX-512; a multiply and an add on SSE) on every thread of the OpenMP team, at the vector width
// of the ISA the GEMM micro-kernel runs. No matmul passes it, so a tier and its peer both near it
// differ by the noise of the machine, not by their code: tandem_bench_cpu reports each sgemm as a
// share of it. Beside it, the bf16 dot-product roof (vdpbf16ps, on CPUs with AVX512-BF16), which
// bounds the tensor_core tier's AVX512-BF16 engine as the FMA roof bounds register_blocked, and
// the AMX tile roof (tdpbf16ps on tiles that never leave the registers), which bounds its AMX
// engine: tandem_bench_bf16 prints them, since a core whose vdpbf16ps delivers fewer flops than
// its FMAs runs bf16 faster by widening it, and a tier far below its roof waits on memory.
#pragma once

#include <omp.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "bench_util.hpp"

namespace tandem::bench {

namespace fma_detail {

// GCC's vector types of each width (a vector_size that depends on a template parameter is not one).
template <int Bytes>
struct Vec;
template <>
struct Vec<64> {
  typedef float type __attribute__((vector_size(64)));
};
template <>
struct Vec<32> {
  typedef float type __attribute__((vector_size(32)));
};
template <>
struct Vec<16> {
  typedef float type __attribute__((vector_size(16)));
};

// Independent chains of acc = acc * a + b: more than the FMA latency times the FMA ports of any
// current x86 core, so the ports never wait for a result, and few enough to stay in registers
// (24 of AVX-512's 32, 12 of AVX2's and SSE's 16). Returns a value that depends on every chain,
// so that none is left out.
template <int Bytes>
constexpr int kChains = Bytes == 64 ? 24 : 12;
template <int Bytes>
[[gnu::always_inline]] inline float chains(std::int64_t iters, float seed) {
  using vec = typename Vec<Bytes>::type;
  constexpr int kChains = fma_detail::kChains<Bytes>, kLanes = Bytes / 4;
  vec acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = vec{} + seed * float(c);
  const vec a = vec{} + 0.999999f, b = vec{} + 1e-7f;
  for (std::int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 24
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * a + b;
  }
  vec total{};
  for (int c = 0; c < kChains; ++c) total += acc[c];
  float r = 0;
  for (int l = 0; l < kLanes; ++l) r += total[l];
  return r;
}

#if defined(__x86_64__)
[[gnu::target("avx512f")]] inline float chains_avx512(std::int64_t iters, float seed) {
  return chains<64>(iters, seed);
}
[[gnu::target("avx2,fma")]] inline float chains_avx2(std::int64_t iters, float seed) {
  return chains<32>(iters, seed);
}

// The same chains of vdpbf16ps: each adds two bf16 products into every f32 lane (four flops).
constexpr int kBf16Chains = 24;
[[gnu::target("avx512f,avx512bf16")]] inline float chains_avx512bf16(std::int64_t iters, float seed) {
  __m512 acc[kBf16Chains];
  for (int c = 0; c < kBf16Chains; ++c) acc[c] = _mm512_set1_ps(seed * float(c));
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80);  // (1.0, 1.0)
  const __m512bh b = (__m512bh)_mm512_set1_epi32(0x33d633d6);  // (1e-7, 1e-7), about
  for (std::int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 24
    for (int c = 0; c < kBf16Chains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  float lanes[16] = {};
  for (int c = 0; c < kBf16Chains; ++c) _mm512_storeu_ps(lanes, _mm512_add_ps(_mm512_loadu_ps(lanes), acc[c]));
  float r = 0;
  for (const float l : lanes) r += l;
  return r;
}

// Independent chains of tdpbf16ps (each 16 x 16 f32 += 16 x 32 bf16 times 32 x 16 bf16, 16384
// flops): six accumulator tiles against two operand tiles, more chains than the instruction's
// latency over its issue interval on the AMX cores so far, so the tile unit never waits.
constexpr int kAmxChains = 6;
struct alignas(64) AmxConfig {
  std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  std::uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
[[gnu::target("amx-tile,amx-bf16")]] inline float chains_amx(std::int64_t iters, float seed) {
  alignas(64) std::uint16_t operand[16 * 32];
  std::fill(operand, operand + 16 * 32, std::uint16_t(0x3a83));  // bf16 1e-3, about
  alignas(64) float out[16 * 16];
  const AmxConfig config;
  _tile_loadconfig(&config);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_zero(4);
  _tile_zero(5);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  for (std::int64_t it = 0; it < iters; ++it) {
    _tile_dpbf16ps(0, 6, 7);
    _tile_dpbf16ps(1, 6, 7);
    _tile_dpbf16ps(2, 6, 7);
    _tile_dpbf16ps(3, 6, 7);
    _tile_dpbf16ps(4, 6, 7);
    _tile_dpbf16ps(5, 6, 7);
  }
  _tile_stored(5, out, 64);
  _tile_release();
  return out[0] + seed;
}
#endif

}  // namespace fma_detail

// One call: `iters` rounds of the chains on each thread of the team, at the width of `isa`
// ("avx512", "avx2", anything else: 16-byte vectors as the compiler builds them). The flops of one
// call: flops_per_call(isa, iters, threads).
inline float fma_roof_call(const std::string& isa, std::int64_t iters) {
  float sink = 0;
#pragma omp parallel reduction(+ : sink)
  {
#if defined(__x86_64__)
    if (isa == "avx512") {
      sink += fma_detail::chains_avx512(iters, 1.0f);
    } else if (isa == "avx2") {
      sink += fma_detail::chains_avx2(iters, 1.0f);
    } else {
      sink += fma_detail::chains<16>(iters, 1.0f);
    }
#else
    sink += fma_detail::chains<16>(iters, 1.0f);
#endif
  }
  return sink;
}
inline double fma_roof_flops(const std::string& isa, std::int64_t iters, int threads) {
  const int lanes = isa == "avx512" ? 16 : isa == "avx2" ? 8 : 4;
  const int chains = isa == "avx512" ? fma_detail::kChains<64> : fma_detail::kChains<16>;
  return 2.0 * chains * lanes * double(iters) * threads;
}

#if defined(__x86_64__)
// Whether this CPU (and the OS) run AVX512-BF16: the bf16 dot-product roof exists only there.
inline bool cpu_has_avx512bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
}
#else
inline bool cpu_has_avx512bf16() { return false; }
#endif

// One call of the vdpbf16ps chains on each thread of the team (only where cpu_has_avx512bf16()).
inline float bf16_dot_roof_call(std::int64_t iters) {
  float sink = 0;
#if defined(__x86_64__)
#pragma omp parallel reduction(+ : sink)
  sink += fma_detail::chains_avx512bf16(iters, 1.0f);
#else
  (void)iters;
#endif
  return sink;
}
inline double bf16_dot_roof_flops(std::int64_t iters, int threads) {
  return 4.0 * fma_detail::kBf16Chains * 16 * double(iters) * threads;
}

#if defined(__x86_64__)
// Whether this CPU has AMX-BF16, the OS saves the tile state and Linux grants this process the
// tile data (asked here as the library asks it: without the grant a tile instruction kills the
// process): the AMX roof exists only there.
inline bool amx_tiles_granted() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0 || (d & (1u << 24)) == 0 || (d & (1u << 22)) == 0) return false;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0 || (c & (1u << 27)) == 0) return false;
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return ::syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}
#else
inline bool amx_tiles_granted() { return false; }
#endif

// One call of the tdpbf16ps chains on each thread of the team (only where amx_tiles_granted()).
inline float amx_roof_call(std::int64_t iters) {
  float sink = 0;
#if defined(__x86_64__)
#pragma omp parallel reduction(+ : sink)
  sink += fma_detail::chains_amx(iters, 1.0f);
#else
  (void)iters;
#endif
  return sink;
}
inline double amx_roof_flops(std::int64_t iters, int threads) {
  return 16384.0 * fma_detail::kAmxChains * double(iters) * threads;
}

// GFLOP/s of a roof on the whole team: the median of calls of about 20 ms each, sized by a first
// timed call. call(iters) runs the chains; flops(iters, threads) counts one call's flops.
template <class Call, class Flops>
double roof_gflops(Call call, Flops flops) {
  using Clock = std::chrono::steady_clock;
  const int threads = omp_get_max_threads();
  const std::int64_t probe = 1 << 18;
  const auto t0 = Clock::now();
  volatile float sink = call(probe);
  const double probe_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto iters = std::max<std::int64_t>(probe, std::int64_t(double(probe) * 0.02 / std::max(probe_s, 1e-6)));
  const double s = median_seconds(7, [&] { sink = call(iters); });
  (void)sink;
  return flops(iters, threads) / s / 1e9;
}
inline double fma_roof_gflops(const std::string& isa) {
  return roof_gflops([&](std::int64_t iters) { return fma_roof_call(isa, iters); },
                     [&](std::int64_t iters, int threads) { return fma_roof_flops(isa, iters, threads); });
}
inline double bf16_dot_roof_gflops() { return roof_gflops(bf16_dot_roof_call, bf16_dot_roof_flops); }
inline double amx_roof_gflops() { return roof_gflops(amx_roof_call, amx_roof_flops); }

}  // namespace tandem::bench
