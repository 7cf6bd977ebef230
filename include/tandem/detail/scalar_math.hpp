// Scalar helpers shared by all backends so that NaN and Inf propagation mean the same everywhere
// (the elementwise functions themselves are rows of tandem/op_table.hpp).
#pragma once

#include <cmath>

#include "tandem/detail/portability.hpp"

namespace tandem::math {

template <class T>
TANDEM_HOST_DEVICE inline bool is_nan(T x) {
  return x != x;
}

// min/max that propagate NaN (as numpy does), so a NaN anywhere in a reduction shows in its result.
template <class T>
TANDEM_HOST_DEVICE inline T nan_max(T a, T b) {
  if (is_nan(a)) return a;
  if (is_nan(b)) return b;
  return b > a ? b : a;
}
template <class T>
TANDEM_HOST_DEVICE inline T nan_min(T a, T b) {
  if (is_nan(a)) return a;
  if (is_nan(b)) return b;
  return b < a ? b : a;
}

// argmax's rule on every backend: the first NaN, else the first maximum. Whether element b at
// index ib replaces the best so far, a at index ia (the index decides ties, and between NaNs).
template <class T, class I>
TANDEM_HOST_DEVICE inline bool argmax_prefers(T a, I ia, T b, I ib) {
  const bool na = is_nan(a), nb = is_nan(b);
  if (na != nb) return nb;
  if (!na && a != b) return b > a;
  return ib < ia;
}

// Integer sums wrap modulo 2^32 on every backend (as GPU atomics do), computed without signed overflow.
TANDEM_HOST_DEVICE inline int wrap_add(int a, int b) {
  return static_cast<int>(static_cast<unsigned>(a) + static_cast<unsigned>(b));
}

}  // namespace tandem::math
