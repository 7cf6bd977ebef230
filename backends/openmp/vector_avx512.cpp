// The openmp kernels that AVX-512 CPUs (F, VL) run, compiled with -m flags rather than under
// kernels.inl's target pragma: the GEMM micro-kernel (a 12 x 32 f32, 12 x 16 f64 register tile, 24
// of the 32 zmm registers; microkernel.inl), the softmax row pass (softmax.inl) and the scan's
// in-cache pass (below). Called only where the CPU has AVX-512. Nothing here may share an inline
// function with another file: the linker could keep this file's AVX-512 copy for a CPU without it
// (tests/isa_objects.sh checks the object).
#define TANDEM_ISA avx512
#define TANDEM_VECTOR_BYTES 64
#define TANDEM_MR_F32 12
#define TANDEM_MR_F64 12
#define TANDEM_NV 2
// clang-format off
#include "microkernel.inl"
#include "softmax.inl"
// clang-format on

// The scan's in-cache pass: the block loop of scan_blocks.inl, as in scan.inl, with 16 lanes
// instead of 4. Each 64-byte vector is scanned in registers with 4 lane shifts (valignd against
// zero). With SSE2 the shuffles (2 per 4 elements, all on one port) bound the pass at well under
// the memory's speed; here it is 1 per 4 elements, so a scan from RAM is bound by RAM. Everything
// here, the included block loop too, is in an anonymous namespace.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "scan_isa.hpp"

namespace tandem::openmp {

namespace {

template <class Acc>
struct Vec512;
template <>
struct Vec512<float> {
  using V = __m512;
  static constexpr int width = 16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void stream(float* p, V v) { _mm512_stream_ps(p, v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V splat(float a) { return _mm512_set1_ps(a); }
  static float first(V v) { return _mm512_cvtss_f32(v); }
  // Lane i gets lane i - k, zeros below k.
  template <int k>
  static V shift(V v) {
    return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(v), _mm512_setzero_si512(), 16 - k));
  }
  static V last(V v) { return _mm512_permutexvar_ps(_mm512_set1_epi32(15), v); }
  static V scan(V v) {
    v = add(v, shift<1>(v));
    v = add(v, shift<2>(v));
    v = add(v, shift<4>(v));
    return add(v, shift<8>(v));
  }
};
template <>
struct Vec512<double> {
  using V = __m512d;
  static constexpr int width = 8;
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static void store(double* p, V v) { _mm512_storeu_pd(p, v); }
  static void stream(double* p, V v) { _mm512_stream_pd(p, v); }
  static V add(V a, V b) { return _mm512_add_pd(a, b); }
  static V splat(double a) { return _mm512_set1_pd(a); }
  static double first(V v) { return _mm512_cvtsd_f64(v); }
  template <int k>
  static V shift(V v) {
    return _mm512_castsi512_pd(_mm512_alignr_epi64(_mm512_castpd_si512(v), _mm512_setzero_si512(), 8 - k));
  }
  static V last(V v) { return _mm512_permutexvar_pd(_mm512_set1_epi64(7), v); }
  static V scan(V v) {
    v = add(v, shift<1>(v));
    v = add(v, shift<2>(v));
    return add(v, shift<4>(v));
  }
};
template <>
struct Vec512<std::uint32_t> {  // i32 data, wrapping arithmetic
  using V = __m512i;
  static constexpr int width = 16;
  static V load(const std::int32_t* p) { return _mm512_loadu_si512(p); }
  static void store(std::int32_t* p, V v) { _mm512_storeu_si512(p, v); }
  static void stream(std::int32_t* p, V v) { _mm512_stream_si512(reinterpret_cast<V*>(p), v); }
  static V add(V a, V b) { return _mm512_add_epi32(a, b); }
  static V splat(std::uint32_t a) { return _mm512_set1_epi32(static_cast<int>(a)); }
  static std::uint32_t first(V v) { return static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm512_castsi512_si128(v))); }
  template <int k>
  static V shift(V v) {
    return _mm512_alignr_epi32(v, _mm512_setzero_si512(), 16 - k);
  }
  static V last(V v) { return _mm512_permutexvar_epi32(_mm512_set1_epi32(15), v); }
  static V scan(V v) {
    v = add(v, shift<1>(v));
    v = add(v, shift<2>(v));
    v = add(v, shift<4>(v));
    return add(v, shift<8>(v));
  }
};

#include "scan_blocks.inl"

}  // namespace

std::int64_t scan_blocks_avx512(bool inclusive, const float* x, float* out, std::int64_t n, float& running,
                                bool streamed, ReadPrefetch pf, const float*& ahead, std::int64_t& ahead_n,
                                float& ahead_sum) {
  return scan_blocks<Vec512<float>>(inclusive, x, out, n, running, streamed, pf, ahead, ahead_n, ahead_sum);
}
std::int64_t scan_blocks_avx512(bool inclusive, const double* x, double* out, std::int64_t n, double& running,
                                bool streamed, ReadPrefetch pf, const double*& ahead, std::int64_t& ahead_n,
                                double& ahead_sum) {
  return scan_blocks<Vec512<double>>(inclusive, x, out, n, running, streamed, pf, ahead, ahead_n, ahead_sum);
}
std::int64_t scan_blocks_avx512(bool inclusive, const std::int32_t* x, std::int32_t* out, std::int64_t n,
                                std::uint32_t& running, bool streamed, ReadPrefetch pf, const std::int32_t*& ahead,
                                std::int64_t& ahead_n, std::uint32_t& ahead_sum) {
  return scan_blocks<Vec512<std::uint32_t>>(inclusive, x, out, n, running, streamed, pf, ahead, ahead_n, ahead_sum);
}

}  // namespace tandem::openmp
