// Scalar functions for the backends that evaluate ops one element at a time: the reference (in
// double) and the GPU kernels (in the element type). math::apply(op, x) comes from the op table.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "tandem/backend.hpp"
#include "tandem/detail/scalar_math.hpp"

namespace tandem::math {

// One value converted between floating types (f16, bf16, f32, f64), rounded to nearest even;
// 16-bit types go through f32, which represents all of them exactly.
template <class D, class S>
TANDEM_HOST_DEVICE inline D convert_value(S v) {
  if constexpr (std::is_same_v<D, S>) {
    return v;
  } else if constexpr (sizeof(D) == 2 || sizeof(S) == 2) {
    return D(static_cast<float>(v));
  } else {
    return static_cast<D>(v);
  }
}

}  // namespace tandem::math
