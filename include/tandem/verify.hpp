// Cross-backend verification: the error bounds that define "correct", an element-by-element
// comparison against the float64 reference, and the case list that `tandem check` and the test
// matrix both run. Every case poisons its outputs with NaN (so unwritten elements fail), surrounds
// them with guard zones (so out-of-bounds writes fail), and draws fresh inputs from a seed.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tandem/backend.hpp"
#include "tandem/buffer.hpp"
#include "tandem/ops.hpp"

namespace tandem::verify {

// Unit roundoff of a compute type: 2^-24 for f32 (and f16/bf16 inputs with f32 accumulation),
// 2^-53 for f64.
double unit_roundoff(DType compute);
// Higham's gamma(n) = n u / (1 - n u): the relative error bound of n roundings.
double gamma(double n, double u);

struct Mismatch {
  std::size_t index = 0;
  double expected = 0, actual = 0, bound = 0;
};

struct Comparison {
  std::size_t count = 0;
  std::size_t failures = 0;
  std::size_t worst_index = 0;
  double worst_share = 0;  // largest |actual - expected| / bound (0 for an exact match, inf past a zero bound)
  std::vector<Mismatch> first_failures;  // the first few, in index order
  bool ok() const { return failures == 0; }
  // "3 of 1000 elements outside the bound; first: [17] expected 1.5 got nan (bound 1e-7) ..."
  std::string describe(std::size_t max_listed = 5) const;
};

// Element i passes when both are NaN, both are the same infinity, or |actual - expected| <= bound[i].
Comparison compare(std::span<const double> actual, std::span<const double> expected, std::span<const double> bound);
// Two buffers of the same size (ShapeMismatch otherwise), on any backends and of any dtypes, read
// back as f64: element i passes as above with bound[i] = atol + rtol * |expected[i]|. describe()
// says which elements fail and by how much.
Comparison compare(const Buffer& actual, const Buffer& expected, double rtol, double atol = 0);

// The op's own derived bound, the one `tandem check` holds every backend to: element i of actual,
// computed by op in actual's dtype, passes when it is within the op's bound of expected[i], the
// exact result (a float64 result, e.g. from the reference backend, is exact enough: the bound
// allows for its rounding; an expected of a narrower dtype adds that dtype's). The bound of a
// unary op is its op-table row's ulps times the unit roundoff, relative to the result; add, sub,
// mul and div are correctly rounded. The derivatives' bounds (relu_grad, ...) depend on their
// inputs, not on the result alone: InvalidArgument naming check(). Same size (ShapeMismatch).
Comparison compare(const Buffer& actual, const Buffer& expected, UnaryOp op);
Comparison compare(const Buffer& actual, const Buffer& expected, BinaryOp op);

// Checks a result of your own against the oracle: recomputes op from its inputs in float64 on the
// reference backend and compares out with it under the op's bound. The buffers may live on any
// backends and be of any dtypes; out's dtype sets the bound's precision.
Comparison check(UnaryOp op, const Buffer& x, const Buffer& out);
Comparison check(BinaryOp op, const Buffer& x, const Buffer& y, const Buffer& out);
// c = alpha op(A) op(B) against the reference, with matmul's bound: gamma(k + 3) |alpha| |A||B|
// in c's precision, plus the float64 oracle's own. options.beta must be 0 (the C that beta
// scaled is gone once c holds the result: InvalidArgument); its tier is ignored.
Comparison check_matmul(const Matrix& a, const Matrix& b, const Matrix& c, const MatmulOptions& options = {});

struct CaseResult {
  std::string algorithm, backend, tier, dtype, size;
  Comparison comparison;
  std::string guard_failure;  // non-empty when a guard zone around an output was overwritten
  std::string error;          // an exception the case raised
  bool passed() const { return error.empty() && guard_failure.empty() && comparison.ok(); }
};

struct CheckOptions {
  bool quick = false;       // fewer sizes: the CLI's --quick
  bool non_finite = false;  // plant NaN, +Inf and -Inf in the inputs
};

struct CheckCase {
  std::string family;     // elementwise, matrix, matmul, reduce, scan, ml
  std::string algorithm;  // "add", "matmul", "inclusive_scan", ...
  std::string tier;       // matmul tier, or "-"
  std::string dtype;
  std::string size;       // "1001", "31x33x32 tA", ...
  std::function<CaseResult(Backend& tested, Backend& reference, std::uint64_t seed)> run;
};

// Every case for this backend: every primitive x the dtypes and tiers it has x the edge sizes.
std::vector<CheckCase> cases(const Backend& backend, const CheckOptions& options);
std::vector<std::string> families();

// Runs one case, turning exceptions into a failed result.
CaseResult run_case(const CheckCase& c, Backend& tested, Backend& reference, std::uint64_t seed);

// The seed for this run: TANDEM_TEST_SEED when set (to replay), else a fresh random one.
std::uint64_t seed_from_environment();

}  // namespace tandem::verify

namespace tandem {
// NumPy's allclose: every |a[i] - b[i]| <= atol + rtol * |b[i]|, with NaNs equal only when
// equal_nan (infinities equal when of the same sign). Same size (ShapeMismatch otherwise); any
// backends and dtypes; waits for both.
bool allclose(const Buffer& a, const Buffer& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
}  // namespace tandem
