// The scalar definition of every elementwise function, shared by all backends so that values,
// and NaN/Inf propagation, mean the same everywhere. The reference backend evaluates these in
// double; the others in the element type T (float or double).
#pragma once

#include <cmath>

#include "tandem/detail/portability.hpp"

namespace tandem::math {

template <class T>
TANDEM_HOST_DEVICE inline bool is_nan(T x) {
  return x != x;
}

// relu(x) = max(x, 0), with NaN kept (a plain max would hide it).
template <class T>
TANDEM_HOST_DEVICE inline T relu(T x) {
  return (x > T(0) || is_nan(x)) ? x : T(0);
}

// sigmoid(x) = 1 / (1 + e^-x); exact limits 0 and 1 at -Inf and +Inf.
template <class T>
TANDEM_HOST_DEVICE inline T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// gelu(x) = x Phi(x) = x/2 erfc(-x/sqrt(2)), the exact (erf) form; erfc keeps the left tail
// accurate where 1 + erf(x) would cancel.
template <class T>
TANDEM_HOST_DEVICE inline T gelu(T x) {
  return T(0.5) * x * std::erfc(-x * T(0.70710678118654752440));
}

template <class T>
TANDEM_HOST_DEVICE inline T square(T x) {
  return x * x;
}

// Derivatives the MLP needs. relu_grad takes the layer input x; sigmoid_grad and tanh_grad take
// the layer output y (what the forward pass kept), as frameworks do.
template <class T>
TANDEM_HOST_DEVICE inline T relu_grad(T x, T dy) {
  if (x > T(0)) return dy;
  return is_nan(x) ? x : T(0);
}
template <class T>
TANDEM_HOST_DEVICE inline T sigmoid_grad(T y, T dy) {
  return dy * y * (T(1) - y);
}
template <class T>
TANDEM_HOST_DEVICE inline T tanh_grad(T y, T dy) {
  return dy * (T(1) - y * y);
}
// gelu'(x) = Phi(x) + x phi(x); takes the layer input x, like relu_grad.
template <class T>
TANDEM_HOST_DEVICE inline T gelu_grad(T x, T dy) {
  const T cdf = T(0.5) * std::erfc(-x * T(0.70710678118654752440));
  const T pdf = T(0.39894228040143267794) * std::exp(T(-0.5) * x * x);
  return dy * (cdf + x * pdf);
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

// Integer sums wrap modulo 2^32 on every backend (as GPU atomics do), computed without signed overflow.
TANDEM_HOST_DEVICE inline int wrap_add(int a, int b) {
  return static_cast<int>(static_cast<unsigned>(a) + static_cast<unsigned>(b));
}

}  // namespace tandem::math
