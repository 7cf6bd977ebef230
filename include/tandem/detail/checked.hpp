// Size arithmetic that cannot overflow silently: views, slices, GEMM arguments and loaders compute
// their extents through these, and refuse what does not fit instead of wrapping around.
#pragma once

#include <cstdint>

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

// The number of elements of a shape from outside (DLPack, a file header): false for a negative
// extent or a product that does not fit in int64 (a zero extent makes 0, whatever the others).
template <class Range>
[[nodiscard]] constexpr bool element_count(const Range& shape, std::int64_t& out) {
  out = 1;
  bool zero = false;
  for (const std::int64_t d : shape) {
    if (d < 0) return false;
    zero = zero || d == 0;
  }
  if (zero) {
    out = 0;
    return true;
  }
  for (const std::int64_t d : shape) {
    if (!mul_fits(out, d, out)) return false;
  }
  return true;
}

}  // namespace tandem::detail
