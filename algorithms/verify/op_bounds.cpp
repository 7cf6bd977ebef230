// The ops' derived bounds (from their rows in the op table), shared by the check cases and by
// verify::compare / verify::check, which apply them to a user's own results.
#include <cmath>
#include <string>

#include "tandem/errors.hpp"
#include "tandem/registry.hpp"
#include "tandem/verify.hpp"
#include "harness.hpp"

namespace tandem::verify {

namespace detail {

double unary_factor(UnaryOp op) {
  return visit(op, []<class Row>(Row) { return Row::ulps; });
}

std::pair<double, double> unary_domain(UnaryOp op) {
  return visit(op, []<class Row>(Row) { return std::pair<double, double>(Row::lo, Row::hi); });
}

double unary_bound(UnaryOp op, double exact, double u) { return (unary_factor(op) * u + u64()) * std::fabs(exact); }

double binary_bound(BinaryOp op, double x, double dy, double exact, double u) {
  return visit(op, [&]<class Row>(Row) {
    if constexpr (requires { typename Row::activation; }) {
      return Row::activation::grad_bound(x, dy, exact, u);
    } else {
      return (u + u64()) * std::fabs(exact);
    }
  });
}

bool bound_needs_inputs(BinaryOp op) {
  return visit(op, []<class Row>(Row) { return requires { typename Row::activation; }; });
}

}  // namespace detail

namespace {

using detail::Host;

void same_size(const Buffer& a, const Buffer& b, const char* what, const char* names) {
  if (a.size() != b.size()) {
    throw ShapeMismatch(std::string(what) + ": " + names + " have " + std::to_string(a.size()) + " and " +
                        std::to_string(b.size()) + " elements");
  }
}

// The unit roundoff of values stored in dtype t (unit_roundoff is the compute type's: f16 and bf16
// compute in f32, but a result stored in them is rounded to their 11 or 8 bits).
double storage_u(DType t) {
  switch (t) {
    case DType::f16:
      return std::ldexp(1.0, -11);
    case DType::bf16:
      return std::ldexp(1.0, -8);
    default:
      return unit_roundoff(t);
  }
}

// The expected values' own rounding: 0 for float64, which the bounds already allow for; a
// narrower expected adds its own.
double extra_u(const Buffer& expected) { return expected.dtype() == DType::f64 ? 0 : storage_u(expected.dtype()); }

Backend& reference(const char* what) {
  try {
    return get_backend("reference");
  } catch (const BackendUnavailable& e) {
    throw BackendUnavailable(std::string(what) + " recomputes on the float64 reference backend: " + e.what());
  }
}

}  // namespace

Comparison compare(const Buffer& actual, const Buffer& expected, UnaryOp op) {
  same_size(actual, expected, "verify::compare", "actual and expected");
  const Host a = detail::download(actual), e = detail::download(expected);
  const double u = storage_u(actual.dtype()), ue = extra_u(expected);
  Host bound(e.size());
  for (std::size_t i = 0; i < e.size(); ++i) {
    bound[i] = detail::unary_bound(op, e[i], u) + (ue > 0 ? detail::unary_bound(op, e[i], ue) : 0);
  }
  return compare(a, e, bound);
}

Comparison compare(const Buffer& actual, const Buffer& expected, BinaryOp op) {
  if (detail::bound_needs_inputs(op)) {
    throw InvalidArgument("verify::compare: the bound of " + std::string(name_of(op)) +
                          " depends on its inputs; use verify::check(op, x, dy, out)");
  }
  same_size(actual, expected, "verify::compare", "actual and expected");
  const Host a = detail::download(actual), e = detail::download(expected);
  const double u = storage_u(actual.dtype()) + extra_u(expected);
  Host bound(e.size());
  for (std::size_t i = 0; i < e.size(); ++i) bound[i] = detail::binary_bound(op, 0, 0, e[i], u);
  return compare(a, e, bound);
}

Comparison check(UnaryOp op, const Buffer& x, const Buffer& out) {
  same_size(x, out, "verify::check", "x and out");
  Backend& ref = reference("verify::check");
  Buffer want(ref, DType::f64, x.size());
  unary(op, detail::upload(ref, DType::f64, detail::download(x)), want);
  return compare(out, want, op);
}

Comparison check(BinaryOp op, const Buffer& x, const Buffer& y, const Buffer& out) {
  same_size(x, y, "verify::check", "x and y");
  same_size(x, out, "verify::check", "x and out");
  Backend& ref = reference("verify::check");
  const Host hx = detail::download(x), hy = detail::download(y);
  Buffer want(ref, DType::f64, x.size());
  binary(op, detail::upload(ref, DType::f64, hx), detail::upload(ref, DType::f64, hy), want);
  const Host e = detail::download(want);
  const double u = storage_u(out.dtype());
  Host bound(e.size());
  for (std::size_t i = 0; i < e.size(); ++i) bound[i] = detail::binary_bound(op, hx[i], hy[i], e[i], u);
  return compare(detail::download(out), e, bound);
}

Comparison check_matmul(const Matrix& a, const Matrix& b, const Matrix& c, const MatmulOptions& options) {
  if (options.beta != 0) {
    throw InvalidArgument("verify::check_matmul: beta must be 0 (the C that beta scaled is gone once c holds the "
                          "result); check c = alpha op(A) op(B) instead");
  }
  Backend& ref = reference("verify::check_matmul");
  // The same matrices in float64 on the reference, in their own layouts; and |A|, |B| for the bound.
  auto lift = [&ref](const Matrix& m, bool absolute) {
    Host h = detail::download(m.buffer);
    if (absolute) {
      for (double& v : h) v = std::fabs(v);
    }
    return matrix(detail::upload(ref, DType::f64, h), m.rows, m.cols, m.ld);
  };
  MatmulOptions exact = options;
  exact.tier = MatmulTier::automatic;
  const Matrix want = matmul(lift(a, false), lift(b, false), exact);
  exact.alpha = 1;
  const Matrix magnitude = matmul(lift(a, true), lift(b, true), exact);
  if (want.rows != c.rows || want.cols != c.cols) {
    throw ShapeMismatch("verify::check_matmul: op(A) op(B) is (" + std::to_string(want.rows) + ", " +
                        std::to_string(want.cols) + "), c is (" + std::to_string(c.rows) + ", " +
                        std::to_string(c.cols) + ")");
  }
  const Matrix got = matrix(c.buffer, c.rows, c.cols, c.ld);  // checks c's extent
  const std::int64_t k = options.trans_a == Transpose::no ? a.cols : a.rows;
  const double u = unit_roundoff(c.buffer.dtype());
  const double g = gamma(static_cast<double>(k + 3), u) + gamma(static_cast<double>(k + 2), detail::u64());
  const Host hc = detail::download(got.buffer), e = detail::download(want.buffer),
             abs_ab = detail::download(magnitude.buffer);
  const std::size_t n = static_cast<std::size_t>(c.rows * c.cols);
  Host actual(n), expected(n), bound(n);
  auto at = [](const Matrix& m, std::int64_t i, std::int64_t j) { return static_cast<std::size_t>(i * m.ld + j); };
  for (std::int64_t i = 0; i < c.rows; ++i) {
    for (std::int64_t j = 0; j < c.cols; ++j) {
      const std::size_t o = static_cast<std::size_t>(i * c.cols + j);
      actual[o] = hc[at(got, i, j)];
      expected[o] = e[at(want, i, j)];
      bound[o] = g * std::fabs(options.alpha) * abs_ab[at(magnitude, i, j)] + storage_u(c.buffer.dtype()) * std::fabs(expected[o]);
    }
  }
  return compare(actual, expected, bound);
}

}  // namespace tandem::verify
