// Building blocks of the verification cases: host data as doubles, uploads in any dtype, outputs
// with NaN poison and guard zones, and the final comparison.
#pragma once

#include <cmath>
#include <random>
#include <utility>
#include <string>
#include <vector>

#include "tandem/buffer.hpp"
#include "tandem/ops.hpp"
#include "tandem/verify.hpp"

namespace tandem::verify::detail {

using Host = std::vector<double>;

inline constexpr std::size_t kGuard = 32;  // elements of guard zone on each side of an output

// Values exactly representable in dtype t, uniform in [lo, hi] (integers for i32).
Host random_values(std::mt19937_64& rng, DType t, std::size_t n, double lo = -1, double hi = 1);
// Plants NaN, +Inf and -Inf at a few random positions (no-op when n < 3).
void plant_non_finite(std::mt19937_64& rng, Host& values);

Buffer upload(Backend& be, DType t, const Host& values);
Host download(const Buffer& b);

// An output buffer inside guard zones; `inner` is what the op writes. Filled with NaN poison
// (INT32_MIN for i32) or with `initial` values for in/out operands.
struct Output {
  Buffer whole;
  Buffer inner;
};
Output make_output(Backend& be, DType t, std::size_t n, const Host* initial = nullptr);
// "" when both guard zones still hold their pattern, else where they were overwritten.
std::string check_guards(const Output& out);

// Fills the names of a result.
CaseResult result_for(const CheckCase& c, const Backend& be);

// v rounded to dtype t (to nearest even; integers to the nearest).
inline double round_to(DType t, double v) {
  switch (t) {
    case DType::f16: return float(half(float(v)));
    case DType::bf16: return float(bfloat16(float(v)));
    case DType::f32: return float(v);
    case DType::f64: return v;
    case DType::i32: return std::nearbyint(v);
  }
  return v;
}

// Element-wise bound helpers.
inline double u_of(DType t) { return unit_roundoff(t); }
inline double u64() { return unit_roundoff(DType::f64); }

// The ops' derived bounds, from their rows in the op table. A unary op computed in a type of unit
// roundoff u is within unary_bound of its exact result (its row's ulps, plus the float64
// oracle's own rounding); unary_domain is the input range its cases draw from.
double unary_factor(UnaryOp op);
std::pair<double, double> unary_domain(UnaryOp op);
double unary_bound(UnaryOp op, double exact, double u);
// A binary op's bound at one element: correctly rounded arithmetic, or the derivative's own bound
// from its activation's row (x is the derivative's input or output, dy the incoming slope).
double binary_bound(BinaryOp op, double x, double dy, double exact, double u);
// Whether binary_bound depends on x and dy (the derivatives), not on the result alone.
bool bound_needs_inputs(BinaryOp op);

// Finishes a case: compares the tested output with the reference, checks the guards.
void finish(CaseResult& r, const Output& out, const Host& expected, const Host& bound);

std::mt19937_64 case_rng(std::uint64_t seed, const CheckCase& c);

// Sizes of vectors and shapes of matrices the cases sweep (edge sizes, then past one block).
std::vector<std::size_t> vector_sizes(bool quick);

}  // namespace tandem::verify::detail
