// The openmp kernels that AVX2 CPUs (with FMA) run, compiled with -m flags rather than under
// kernels.inl's target pragma: the GEMM micro-kernel (a 6 x 16 f32, 6 x 8 f64 register tile,
// 12 of the 16 ymm registers; microkernel.inl), the softmax row pass (softmax.inl) and the scan's in-cache pass (below).
// Called only where the CPU has AVX2. Nothing here may share an inline function with another
// file: the linker could keep this file's AVX2 copy for a CPU without it (tests/isa_objects.sh
// checks the object).
#define TANDEM_ISA avx2
#define TANDEM_VECTOR_BYTES 32
#define TANDEM_MR_F32 6
#define TANDEM_MR_F64 6
#define TANDEM_NV 2
// clang-format off
#include "microkernel.inl"
#include "softmax.inl"
// clang-format on

// The scan's in-cache pass: the block loop of scan_blocks.inl, as in scan.inl, with 32-byte
// vectors. Each vector is scanned in its two 16-byte halves (two lane shifts), then the low half's
// total is added to the high half (one in-lane broadcast and one cross-half move): 5 shuffles per 8
// floats against SSE2's 6, and half the loads, stores and additions. Everything here, the included
// block loop too, is in an anonymous namespace.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "scan_isa.hpp"

namespace tandem::openmp {
namespace {

// Moves the low 16-byte half to the high half, zeros below: the carry from one half to the next.
inline __m256i low_to_high(__m256i v) { return _mm256_permute2x128_si256(v, v, 0x08); }

// Lane i gets lane i - k (k elements of 4 bytes), zeros below, across the halves.
template <int k>
inline __m256i shift32(__m256i v) {
  return _mm256_alignr_epi8(v, low_to_high(v), 16 - 4 * k);
}

template <class Acc>
struct Vec256;
template <>
struct Vec256<float> {
  using V = __m256;
  static constexpr int width = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void stream(float* p, V v) { _mm256_stream_ps(p, v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V splat(float a) { return _mm256_set1_ps(a); }
  static float first(V v) { return _mm256_cvtss_f32(v); }
  template <int k>
  static V shift(V v) {
    return _mm256_castsi256_ps(shift32<k>(_mm256_castps_si256(v)));
  }
  static V last(V v) { return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(7)); }
  static V scan(V v) {
    __m256i i = _mm256_castps_si256(v);
    v = add(v, _mm256_castsi256_ps(_mm256_slli_si256(i, 4)));  // within each half
    v = add(v, _mm256_castsi256_ps(_mm256_slli_si256(_mm256_castps_si256(v), 8)));
    const V half_total = _mm256_shuffle_ps(v, v, 0xFF);
    return add(v, _mm256_castsi256_ps(low_to_high(_mm256_castps_si256(half_total))));
  }
};
template <>
struct Vec256<double> {
  using V = __m256d;
  static constexpr int width = 4;
  static V load(const double* p) { return _mm256_loadu_pd(p); }
  static void store(double* p, V v) { _mm256_storeu_pd(p, v); }
  static void stream(double* p, V v) { _mm256_stream_pd(p, v); }
  static V add(V a, V b) { return _mm256_add_pd(a, b); }
  static V splat(double a) { return _mm256_set1_pd(a); }
  static double first(V v) { return _mm256_cvtsd_f64(v); }
  template <int k>
  static V shift(V v) {
    return _mm256_castsi256_pd(shift32<2 * k>(_mm256_castpd_si256(v)));
  }
  static V last(V v) { return _mm256_permute4x64_pd(v, 0xFF); }
  static V scan(V v) {
    v = add(v, _mm256_castsi256_pd(_mm256_slli_si256(_mm256_castpd_si256(v), 8)));  // within each half
    const V half_total = _mm256_unpackhi_pd(v, v);
    return add(v, _mm256_castsi256_pd(low_to_high(_mm256_castpd_si256(half_total))));
  }
};
template <>
struct Vec256<std::uint32_t> {  // i32 data, wrapping arithmetic
  using V = __m256i;
  static constexpr int width = 8;
  static V load(const std::int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const V*>(p)); }
  static void store(std::int32_t* p, V v) { _mm256_storeu_si256(reinterpret_cast<V*>(p), v); }
  static void stream(std::int32_t* p, V v) { _mm256_stream_si256(reinterpret_cast<V*>(p), v); }
  static V add(V a, V b) { return _mm256_add_epi32(a, b); }
  static V splat(std::uint32_t a) { return _mm256_set1_epi32(static_cast<int>(a)); }
  static std::uint32_t first(V v) { return static_cast<std::uint32_t>(_mm256_cvtsi256_si32(v)); }
  template <int k>
  static V shift(V v) {
    return shift32<k>(v);
  }
  static V last(V v) { return _mm256_permutevar8x32_epi32(v, _mm256_set1_epi32(7)); }
  static V scan(V v) {
    v = add(v, _mm256_slli_si256(v, 4));  // within each half
    v = add(v, _mm256_slli_si256(v, 8));
    return add(v, low_to_high(_mm256_shuffle_epi32(v, 0xFF)));
  }
};

#include "scan_blocks.inl"

}  // namespace

std::int64_t scan_blocks_avx2(bool inclusive, const float* x, float* out, std::int64_t n, float& running, bool streamed,
                              ReadPrefetch pf, const float*& ahead, std::int64_t& ahead_n, float& ahead_sum) {
  return scan_blocks<Vec256<float>>(inclusive, x, out, n, running, streamed, pf, ahead, ahead_n, ahead_sum);
}
std::int64_t scan_blocks_avx2(bool inclusive, const double* x, double* out, std::int64_t n, double& running,
                              bool streamed, ReadPrefetch pf, const double*& ahead, std::int64_t& ahead_n,
                              double& ahead_sum) {
  return scan_blocks<Vec256<double>>(inclusive, x, out, n, running, streamed, pf, ahead, ahead_n, ahead_sum);
}
std::int64_t scan_blocks_avx2(bool inclusive, const std::int32_t* x, std::int32_t* out, std::int64_t n,
                              std::uint32_t& running, bool streamed, ReadPrefetch pf, const std::int32_t*& ahead,
                              std::int64_t& ahead_n, std::uint32_t& ahead_sum) {
  return scan_blocks<Vec256<std::uint32_t>>(inclusive, x, out, n, running, streamed, pf, ahead, ahead_n, ahead_sum);
}

}  // namespace tandem::openmp
