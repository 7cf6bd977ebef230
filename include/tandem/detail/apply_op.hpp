// Each elementwise op as one scalar function of the compute type, for the backends that evaluate
// ops one element at a time: the reference (in double) and the GPU kernels (in the element type).
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "tandem/backend.hpp"
#include "tandem/detail/scalar_math.hpp"

namespace tandem::math {

template <class T>
TANDEM_HOST_DEVICE inline T apply(BinaryOp op, T x, T y) {
  switch (op) {
    case BinaryOp::add:
      return x + y;
    case BinaryOp::sub:
      return x - y;
    case BinaryOp::mul:
      return x * y;
    case BinaryOp::div:
      return x / y;
    case BinaryOp::relu_grad:
      return relu_grad(x, y);
    case BinaryOp::sigmoid_grad:
      return sigmoid_grad(x, y);
    case BinaryOp::tanh_grad:
      return tanh_grad(x, y);
    case BinaryOp::gelu_grad:
      return gelu_grad(x, y);
  }
  return std::numeric_limits<T>::quiet_NaN();
}

template <class T>
TANDEM_HOST_DEVICE inline T apply(UnaryOp op, T x) {
  switch (op) {
    case UnaryOp::relu:
      return relu(x);
    case UnaryOp::sigmoid:
      return sigmoid(x);
    case UnaryOp::tanh:
      return std::tanh(x);
    case UnaryOp::exp:
      return std::exp(x);
    case UnaryOp::log:
      return std::log(x);
    case UnaryOp::sqrt:
      return std::sqrt(x);
    case UnaryOp::square:
      return x * x;
    case UnaryOp::abs:
      return std::fabs(x);
    case UnaryOp::gelu:
      return gelu(x);
    case UnaryOp::neg:
      return -x;
  }
  return std::numeric_limits<T>::quiet_NaN();
}

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
