// The scan's in-cache pass with AVX2 (compiled with -mavx2, called only where the CPU has it):
// the block loop of scan_blocks.inl, as in scan.inl, with 32-byte vectors. Each vector is scanned
// in its two 16-byte halves (two lane shifts), then the low half's total is added to the high
// half (one in-lane broadcast and one cross-half move): 5 shuffles per 8 floats against SSE2's 6,
// and half the loads, stores and additions.
// Self-contained on purpose, like scan_avx512.cpp: everything here is in an anonymous namespace,
// so no inline function is shared with another file.
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
