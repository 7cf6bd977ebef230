// The CPU's multiply-add roof, measured: GFLOP/s of independent multiply-adds (fused on AVX2 and
// AVX-512; a multiply and an add on SSE) on every thread of the OpenMP team, at the vector width
// of the ISA the GEMM micro-kernel runs. No matmul passes it, so a tier and its peer both near it
// differ by the noise of the machine, not by their code: tandem_bench_cpu reports each sgemm as a
// share of it.
#pragma once

#include <omp.h>

#include <cstdint>
#include <string>

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

}  // namespace tandem::bench
