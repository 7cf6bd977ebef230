// Size arithmetic that cannot overflow silently: views, slices, GEMM arguments and loaders compute
// their extents through these, and refuse what does not fit instead of wrapping around.
#pragma once

namespace tandem::detail {

// out = a * b; false (out unspecified) when the exact product does not fit in T.
template <class T>
[[nodiscard]] constexpr bool mul_fits(T a, T b, T& out) {
  return !__builtin_mul_overflow(a, b, &out);
}
// out = a + b; false when the exact sum does not fit in T.
template <class T>
[[nodiscard]] constexpr bool add_fits(T a, T b, T& out) {
  return !__builtin_add_overflow(a, b, &out);
}

}  // namespace tandem::detail
