// The op table: every elementwise op and reduction defined once, here. Each row is a struct in tandem::op with
//   name            the op's name everywhere (CLI, check reports, JSON)
//   apply(x)        the scalar function in the compute type T, the same code on every backend
//                   (host, CUDA, HIP, simulator); NaN and Inf propagate through it
//   lo, hi, ulps    verification: inputs are drawn from [lo, hi] (inside the domain) and a result
//                   may differ from the float64 oracle by ulps units of roundoff of the tested type
// and, for activations (layers of an MLP, fused into a linear layer's epilogue):
//   grad(v, dy)     dx = dy * f'(x), with v the layer's input or output (grad_from says which:
//                   what the forward pass keeps)
//   grad_bound      verification: the error bound of grad in a type of unit roundoff u, given
//                   the exact result, from the derivative's terms (where they may cancel)
//   he_init         a linear layer before it starts with He initialisation (else Xavier)
//   model_code      the layer's code in saved models; never reuse or change one
//
// The lists below turn the rows into the UnaryOp and BinaryOp enums (each activation adds a
// BinaryOp `<name>_grad`), their names, scalar dispatch for kernels (apply) and compile-time
// dispatch for host code (visit). Adding an op: write its struct and add it to TANDEM_UNARY_OPS;
// every backend, the public shortcuts (ops.hpp), the verification matrix, the MLP, the model
// format and `tandem train --activation` pick it up.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>

#include "tandem/detail/portability.hpp"
#include "tandem/detail/scalar_math.hpp"
#include "tandem/errors.hpp"

namespace tandem {

// What an activation's derivative reads: the layer's input x or its output y.
enum class GradFrom { input, output };

namespace op {

// Error-bound helpers for the grad_bound rows (verify::gamma and verify::unit_roundoff are these).
// Higham's gamma(n, u) = n u / (1 - n u) bounds n roundings (infinite once n u reaches 1).
constexpr double kUnitRoundoffF64 = 0x1p-53;
constexpr double gamma(double n, double u) {
  const double nu = n * u;
  return nu < 1 ? nu / (1 - nu) : std::numeric_limits<double>::infinity();
}

struct Plain {
  static constexpr bool activation = false;
};
struct Activation {
  static constexpr bool activation = true;
};

// ---- unary rows ----
// relu(x) = max(x, 0), with NaN kept (a plain max would hide it).
struct Relu : Activation {
  static constexpr std::string_view name = "relu", grad_name = "relu_grad";
  static constexpr double lo = -1, hi = 1, ulps = 1;
  template <class T>
  TANDEM_HOST_DEVICE static T apply(T x) {
    return (x > T(0) || math::is_nan(x)) ? x : T(0);
  }
  // From the output: relu(z) > 0 exactly where z > 0 (the input may be unbiased).
  static constexpr GradFrom grad_from = GradFrom::output;
  static constexpr bool he_init = true;
  static constexpr std::uint32_t model_code = 2;
  template <class T>
  TANDEM_HOST_DEVICE static T grad(T v, T dy) {
    if (v > T(0)) return dy;
    return math::is_nan(v) ? v : T(0);
  }
  static double grad_bound(double, double, double exact, double u) { return (u + kUnitRoundoffF64) * std::fabs(exact); }
};

// sigmoid(x) = 1 / (1 + e^-x); exact limits 0 and 1 at -Inf and +Inf. libm's exp is within 1-2
// ulp and sigmoid composes three roundings: 8 ulps.
struct Sigmoid : Activation {
  static constexpr std::string_view name = "sigmoid", grad_name = "sigmoid_grad";
  static constexpr double lo = -8, hi = 8, ulps = 8;
  template <class T>
  TANDEM_HOST_DEVICE static T apply(T x) {
    return T(1) / (T(1) + std::exp(-x));
  }
  // dy * y * (1 - y), from the output y.
  static constexpr GradFrom grad_from = GradFrom::output;
  static constexpr bool he_init = false;
  static constexpr std::uint32_t model_code = 3;
  template <class T>
  TANDEM_HOST_DEVICE static T grad(T y, T dy) {
    return dy * y * (T(1) - y);
  }
  static double grad_bound(double, double, double exact, double u) { return gamma(4, u) * std::fabs(exact); }
};

struct Tanh : Activation {
  static constexpr std::string_view name = "tanh", grad_name = "tanh_grad";
  static constexpr double lo = -8, hi = 8, ulps = 8;
  template <class T>
  TANDEM_HOST_DEVICE static T apply(T x) {
    return std::tanh(x);
  }
  // dy * (1 - y^2), from the output y: y^2 rounds before the cancellation.
  static constexpr GradFrom grad_from = GradFrom::output;
  static constexpr bool he_init = false;
  static constexpr std::uint32_t model_code = 4;
  template <class T>
  TANDEM_HOST_DEVICE static T grad(T y, T dy) {
    return dy * (T(1) - y * y);
  }
  static double grad_bound(double y, double dy, double, double u) {
    return gamma(4, u) * std::fabs(dy) * (y * y + std::fabs(1 - y * y));
  }
};

struct Exp : Plain {
  static constexpr std::string_view name = "exp";
  static constexpr double lo = -8, hi = 8, ulps = 8;
  template <class T>
  TANDEM_HOST_DEVICE static T apply(T x) {
    return std::exp(x);
  }
};
struct Log : Plain {
  static constexpr std::string_view name = "log";
  static constexpr double lo = 1e-3, hi = 4, ulps = 8;
  template <class T>
  TANDEM_HOST_DEVICE static T apply(T x) {
    return std::log(x);
  }
};
struct Sqrt : Plain {
  static constexpr std::string_view name = "sqrt";
  static constexpr double lo = 1e-3, hi = 4, ulps = 1;
  template <class T>
  TANDEM_HOST_DEVICE static T apply(T x) {
    return std::sqrt(x);
  }
};
struct Square : Plain {
  static constexpr std::string_view name = "square";
  static constexpr double lo = -1, hi = 1, ulps = 1;
  template <class T>
  TANDEM_HOST_DEVICE static T apply(T x) {
    return x * x;
  }
};
struct Abs : Plain {
  static constexpr std::string_view name = "abs";
  static constexpr double lo = -1, hi = 1, ulps = 1;
  template <class T>
  TANDEM_HOST_DEVICE static T apply(T x) {
    return std::fabs(x);
  }
};
struct Neg : Plain {
  static constexpr std::string_view name = "neg";
  static constexpr double lo = -1, hi = 1, ulps = 1;
  template <class T>
  TANDEM_HOST_DEVICE static T apply(T x) {
    return -x;
  }
};

// gelu(x) = x Phi(x) = x/2 erfc(-x/sqrt(2)), the exact (erf) form; erfc keeps the left tail
// accurate where 1 + erf(x) would cancel. 32 ulps: erfc (a few ulp on GPUs), three roundings, and
// the rounding of erfc's argument z = -x/sqrt(2), which the tail amplifies by 2 z^2 (16 at x = -4).
struct Gelu : Activation {
  static constexpr std::string_view name = "gelu", grad_name = "gelu_grad";
  static constexpr double lo = -4, hi = 4, ulps = 32;
  template <class T>
  TANDEM_HOST_DEVICE static T apply(T x) {
    return T(0.5) * x * std::erfc(-x * T(0.70710678118654752440));
  }
  // dy (Phi(x) + x phi(x)), from the input x: the two terms may cancel.
  static constexpr GradFrom grad_from = GradFrom::input;
  static constexpr bool he_init = true;
  static constexpr std::uint32_t model_code = 5;
  template <class T>
  TANDEM_HOST_DEVICE static T grad(T x, T dy) {
    const T cdf = T(0.5) * std::erfc(-x * T(0.70710678118654752440));
    const T pdf = T(0.39894228040143267794) * std::exp(T(-0.5) * x * x);
    return dy * (cdf + x * pdf);
  }
  static double grad_bound(double x, double dy, double, double u) {
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * 3.14159265358979323846);
    return gamma(16, u) * std::fabs(dy) * (cdf + std::fabs(x) * pdf);
  }
};

// silu(x) = x sigmoid(x) = x / (1 + e^-x) (swish): sigmoid's roundings and one more, 8 ulps.
struct Silu : Activation {
  static constexpr std::string_view name = "silu", grad_name = "silu_grad";
  static constexpr double lo = -8, hi = 8, ulps = 8;
  template <class T>
  TANDEM_HOST_DEVICE static T apply(T x) {
    return x / (T(1) + std::exp(-x));
  }
  // dy s (1 + x (1 - s)) with s = sigmoid(x), from the input x. The inner sum cancels near
  // x = -1.28; s's error (a few u) reaches it multiplied by |x|, so the terms are bounded by
  // s (1 + |x|), and 16 roundings' worth covers s, 1 - s, the products and the sum.
  static constexpr GradFrom grad_from = GradFrom::input;
  static constexpr bool he_init = true;
  static constexpr std::uint32_t model_code = 6;
  template <class T>
  TANDEM_HOST_DEVICE static T grad(T x, T dy) {
    const T s = T(1) / (T(1) + std::exp(-x));
    return dy * (s * (T(1) + x * (T(1) - s)));
  }
  static double grad_bound(double x, double dy, double, double u) {
    const double s = 1 / (1 + std::exp(-x));
    return gamma(16, u) * std::fabs(dy) * s * (1 + std::fabs(x));
  }
};

// ---- binary rows ----
struct Add {
  static constexpr std::string_view name = "add";
  template <class T>
  TANDEM_HOST_DEVICE static T apply(T x, T y) {
    return x + y;
  }
};
struct Sub {
  static constexpr std::string_view name = "sub";
  template <class T>
  TANDEM_HOST_DEVICE static T apply(T x, T y) {
    return x - y;
  }
};
struct Mul {
  static constexpr std::string_view name = "mul";
  template <class T>
  TANDEM_HOST_DEVICE static T apply(T x, T y) {
    return x * y;
  }
};
struct Div {
  static constexpr std::string_view name = "div";
  template <class T>
  TANDEM_HOST_DEVICE static T apply(T x, T y) {
    return x / y;
  }
};
// An activation's derivative as a binary op: out = Act::grad(v, dy).
template <class Act>
struct Grad {
  using activation = Act;
  static constexpr std::string_view name = Act::grad_name;
  template <class T>
  TANDEM_HOST_DEVICE static T apply(T v, T dy) {
    return Act::template grad<T>(v, dy);
  }
};

// ---- reduction rows ----
// Each row: name; index_result (the result is the i32 index of an element, not a value);
// float_only (i32 input is refused); per_axis (reduce_rows and reduce_cols offer it);
// empty_is_zero (the result for no elements is 0; the others refuse an empty x). Value
// reductions also give their algebra, the same on the host and in kernels: element(x) (what an
// element contributes), combine(a, b), identity (combine's neutral element) and finish(acc).
// argmax's rule is math::argmax_prefers: the first NaN, else the first maximum. min, max and
// argmax propagate NaN; i32 sums wrap modulo 2^32.
// What sum, min and max share: an element contributes itself and the total is the result.
struct OfValues {
  template <class T>
  TANDEM_HOST_DEVICE static T element(T x) {
    return x;
  }
  template <class T>
  TANDEM_HOST_DEVICE static T finish(T acc) {
    return acc;
  }
};
struct Sum : OfValues {
  static constexpr std::string_view name = "sum";
  static constexpr bool index_result = false, float_only = false, per_axis = true, empty_is_zero = true;
  template <class T>
  TANDEM_HOST_DEVICE static T identity() {
    return T(0);
  }
  template <class T>
  TANDEM_HOST_DEVICE static T combine(T a, T b) {
    if constexpr (std::numeric_limits<T>::is_integer) {
      return math::wrap_add(a, b);
    } else {
      return a + b;
    }
  }
};
struct Min : OfValues {
  static constexpr std::string_view name = "min";
  static constexpr bool index_result = false, float_only = false, per_axis = false, empty_is_zero = false;
  template <class T>
  TANDEM_HOST_DEVICE static T identity() {
    return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
  }
  template <class T>
  TANDEM_HOST_DEVICE static T combine(T a, T b) {
    return math::nan_min(a, b);
  }
};
struct Max : OfValues {
  static constexpr std::string_view name = "max";
  static constexpr bool index_result = false, float_only = false, per_axis = true, empty_is_zero = false;
  template <class T>
  TANDEM_HOST_DEVICE static T identity() {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
  }
  template <class T>
  TANDEM_HOST_DEVICE static T combine(T a, T b) {
    return math::nan_max(a, b);
  }
};
struct Argmax {
  static constexpr std::string_view name = "argmax";
  static constexpr bool index_result = true, float_only = false, per_axis = false, empty_is_zero = false;
};
// sqrt(sum x^2)
struct Norm2 {
  static constexpr std::string_view name = "norm2";
  static constexpr bool index_result = false, float_only = true, per_axis = false, empty_is_zero = true;
  template <class T>
  TANDEM_HOST_DEVICE static T identity() {
    return T(0);
  }
  template <class T>
  TANDEM_HOST_DEVICE static T element(T x) {
    return x * x;
  }
  template <class T>
  TANDEM_HOST_DEVICE static T combine(T a, T b) {
    return a + b;
  }
  template <class T>
  TANDEM_HOST_DEVICE static T finish(T acc) {
    return T(std::sqrt(acc));
  }
};

}  // namespace op

// The rows, in enum order: X(enum name, row struct, activation | plain). Append new ops at the end
// (the enums' values are part of the ABI).
#define TANDEM_UNARY_OPS(X)       \
  X(relu, Relu, activation)       \
  X(sigmoid, Sigmoid, activation) \
  X(tanh, Tanh, activation)       \
  X(exp, Exp, plain)              \
  X(log, Log, plain)              \
  X(sqrt, Sqrt, plain)            \
  X(square, Square, plain)        \
  X(abs, Abs, plain)              \
  X(neg, Neg, plain)              \
  X(gelu, Gelu, activation)       \
  X(silu, Silu, activation)
#define TANDEM_ARITHMETIC_OPS(X) X(add, Add) X(sub, Sub) X(mul, Mul) X(div, Div)

#define TANDEM_REDUCE_OPS(X) X(sum, Sum) X(min, Min) X(max, Max) X(argmax, Argmax) X(norm2, Norm2)

// TANDEM_IF_activation(...) expands to its arguments, TANDEM_IF_plain(...) to nothing.
#define TANDEM_IF_activation(...) __VA_ARGS__
#define TANDEM_IF_plain(...)

#define TANDEM_UNARY_ENUM_(n, S, kind) n,
#define TANDEM_GRAD_ENUM_(n, S, kind) TANDEM_IF_##kind(n##_grad, )
#define TANDEM_ARITHMETIC_ENUM_(n, S) n,
enum class UnaryOp { TANDEM_UNARY_OPS(TANDEM_UNARY_ENUM_) };
enum class ReduceOp { TANDEM_REDUCE_OPS(TANDEM_ARITHMETIC_ENUM_) };
// add, sub, mul, div, then each activation's derivative (relu_grad, ...).
enum class BinaryOp { TANDEM_ARITHMETIC_OPS(TANDEM_ARITHMETIC_ENUM_) TANDEM_UNARY_OPS(TANDEM_GRAD_ENUM_) };
#undef TANDEM_UNARY_ENUM_
#undef TANDEM_GRAD_ENUM_
#undef TANDEM_ARITHMETIC_ENUM_

#define TANDEM_UNARY_VALUE_(n, S, kind) UnaryOp::n,
#define TANDEM_ACTIVATION_VALUE_(n, S, kind) TANDEM_IF_##kind(UnaryOp::n, )
#define TANDEM_BINARY_VALUE_(n, S) BinaryOp::n,
#define TANDEM_REDUCE_VALUE_(n, S) ReduceOp::n,
#define TANDEM_GRAD_VALUE_(n, S, kind) TANDEM_IF_##kind(BinaryOp::n##_grad, )
// Every op, in enum order; the activations alone.
inline constexpr UnaryOp kUnaryOps[] = {TANDEM_UNARY_OPS(TANDEM_UNARY_VALUE_)};
inline constexpr UnaryOp kActivations[] = {TANDEM_UNARY_OPS(TANDEM_ACTIVATION_VALUE_)};
inline constexpr ReduceOp kReduceOps[] = {TANDEM_REDUCE_OPS(TANDEM_REDUCE_VALUE_)};
inline constexpr BinaryOp kBinaryOps[] = {TANDEM_ARITHMETIC_OPS(TANDEM_BINARY_VALUE_)
                                              TANDEM_UNARY_OPS(TANDEM_GRAD_VALUE_)};
#undef TANDEM_UNARY_VALUE_
#undef TANDEM_ACTIVATION_VALUE_
#undef TANDEM_BINARY_VALUE_
#undef TANDEM_REDUCE_VALUE_
#undef TANDEM_GRAD_VALUE_

// A value outside an op enum (a cast from a bad integer): InvalidArgument, never a silent default.
[[noreturn]] inline void unknown_op(const char* type, int value) {
  throw InvalidArgument(std::string("unknown ") + type + " value " + std::to_string(value));
}

// Calls f(row) with the op's row struct (op::Relu{}, op::Grad<op::Gelu>{}, ...) and returns what it
// returns: compile-time dispatch, one instantiation of f per op.
template <class F>
constexpr decltype(auto) visit(UnaryOp o, F&& f) {
  switch (o) {
#define TANDEM_VISIT_CASE_(n, S, kind) \
  case UnaryOp::n:                     \
    return std::forward<F>(f)(op::S{});
    TANDEM_UNARY_OPS(TANDEM_VISIT_CASE_)
#undef TANDEM_VISIT_CASE_
  }
  unknown_op("UnaryOp", static_cast<int>(o));
}
template <class F>
constexpr decltype(auto) visit(BinaryOp o, F&& f) {
  switch (o) {
#define TANDEM_VISIT_CASE_(n, S) \
  case BinaryOp::n:              \
    return std::forward<F>(f)(op::S{});
    TANDEM_ARITHMETIC_OPS(TANDEM_VISIT_CASE_)
#undef TANDEM_VISIT_CASE_
#define TANDEM_VISIT_CASE_(n, S, kind) \
  TANDEM_IF_##kind(case BinaryOp::n##_grad : return std::forward<F>(f)(op::Grad<op::S>{});)
    TANDEM_UNARY_OPS(TANDEM_VISIT_CASE_)
#undef TANDEM_VISIT_CASE_
  }
  unknown_op("BinaryOp", static_cast<int>(o));
}
template <class F>
constexpr decltype(auto) visit(ReduceOp o, F&& f) {
  switch (o) {
#define TANDEM_VISIT_CASE_(n, S) \
  case ReduceOp::n:              \
    return std::forward<F>(f)(op::S{});
    TANDEM_REDUCE_OPS(TANDEM_VISIT_CASE_)
#undef TANDEM_VISIT_CASE_
  }
  unknown_op("ReduceOp", static_cast<int>(o));
}
// The same over activations only (f is instantiated for activation rows alone); `other` is
// called, with no argument, for an op that is not an activation.
template <class F, class Other>
constexpr decltype(auto) visit_activation(UnaryOp o, F&& f, Other&& other) {
  switch (o) {
#define TANDEM_VISIT_CASE_(n, S, kind) TANDEM_IF_##kind(case UnaryOp::n : return std::forward<F>(f)(op::S{});)
    TANDEM_UNARY_OPS(TANDEM_VISIT_CASE_)
#undef TANDEM_VISIT_CASE_
    default:
      break;
  }
  return std::forward<Other>(other)();
}

constexpr bool is_activation(UnaryOp o) {
  return visit(o, []<class Row>(Row) { return Row::activation; });
}
// The derivative of an activation as a BinaryOp (relu -> relu_grad); add for other ops (check
// is_activation first).
constexpr BinaryOp grad_op(UnaryOp o) {
  switch (o) {
#define TANDEM_GRAD_CASE_(n, S, kind) TANDEM_IF_##kind(case UnaryOp::n : return BinaryOp::n##_grad;)
    TANDEM_UNARY_OPS(TANDEM_GRAD_CASE_)
#undef TANDEM_GRAD_CASE_
    default:
      return BinaryOp::add;
  }
}

// A reduction's attributes (its row's constants), for argument checks and dispatch.
struct ReduceTraits {
  std::string_view name;
  bool index_result, float_only, per_axis, empty_is_zero;
};
constexpr ReduceTraits traits_of(ReduceOp o) {
  return visit(o, []<class Row>(Row) {
    return ReduceTraits{Row::name, Row::index_result, Row::float_only, Row::per_axis, Row::empty_is_zero};
  });
}

// What an activation's derivative reads (input for ops that are not activations).
constexpr GradFrom grad_from(UnaryOp o) {
  return visit_activation(
      o, []<class Row>(Row) { return Row::grad_from; }, [] { return GradFrom::input; });
}

namespace math {
// Runtime dispatch for kernels that take the op as an argument (GPU kernels, the reference):
// the same row functions, in device code too.
template <class T>
TANDEM_HOST_DEVICE inline T apply(UnaryOp o, T x) {
  switch (o) {
#define TANDEM_APPLY_CASE_(n, S, kind) \
  case UnaryOp::n:                     \
    return op::S::template apply<T>(x);
    TANDEM_UNARY_OPS(TANDEM_APPLY_CASE_)
#undef TANDEM_APPLY_CASE_
  }
  return std::numeric_limits<T>::quiet_NaN();
}
template <class T>
TANDEM_HOST_DEVICE inline T apply(BinaryOp o, T x, T y) {
  switch (o) {
#define TANDEM_APPLY_CASE_(n, S) \
  case BinaryOp::n:              \
    return op::S::template apply<T>(x, y);
    TANDEM_ARITHMETIC_OPS(TANDEM_APPLY_CASE_)
#undef TANDEM_APPLY_CASE_
#define TANDEM_APPLY_CASE_(n, S, kind) TANDEM_IF_##kind(case BinaryOp::n##_grad : return op::S::template grad<T>(x, y);)
    TANDEM_UNARY_OPS(TANDEM_APPLY_CASE_)
#undef TANDEM_APPLY_CASE_
  }
  return std::numeric_limits<T>::quiet_NaN();
}
}  // namespace math

}  // namespace tandem
