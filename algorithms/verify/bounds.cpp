#include <cmath>
#include <cstdlib>
#include <random>
#include <sstream>

#include "tandem/environment.hpp"
#include "tandem/errors.hpp"
#include "tandem/verify.hpp"
#include "harness.hpp"

namespace tandem::verify {

double unit_roundoff(DType compute) {
  switch (compute) {
    case DType::f64:
      return op::kUnitRoundoffF64;
    case DType::f32:
    case DType::f16:
    case DType::bf16:
      return std::ldexp(1.0, -24);
    case DType::i32:
      return 0;
  }
  return 0;
}

double gamma(double n, double u) { return op::gamma(n, u); }

Comparison compare(std::span<const double> actual, std::span<const double> expected, std::span<const double> bound) {
  if (actual.size() != expected.size() || bound.size() != expected.size()) {
    throw ShapeMismatch("verify::compare: actual, expected and bound differ in length");
  }
  Comparison c;
  c.count = actual.size();
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i], b = bound[i];
    bool pass;
    double share = 0;
    if (std::isnan(e) || std::isnan(a)) {
      pass = std::isnan(e) && std::isnan(a);
      share = pass ? 0 : INFINITY;
    } else if (std::isinf(e) || std::isinf(a)) {
      pass = a == e;
      share = pass ? 0 : INFINITY;
    } else {
      const double err = std::fabs(a - e);
      share = err == 0 ? 0 : (b > 0 ? err / b : INFINITY);
      pass = err <= b;
    }
    if (share > c.worst_share || (i == 0 && share >= c.worst_share)) {
      c.worst_share = share;
      c.worst_index = i;
    }
    if (!pass) {
      ++c.failures;
      if (c.first_failures.size() < 8) c.first_failures.push_back({i, e, a, b});
    }
  }
  return c;
}

std::string Comparison::describe(std::size_t max_listed) const {
  std::ostringstream out;
  out.precision(9);
  if (failures == 0) {
    out << "all " << count << " elements within bound; worst [" << worst_index << "] at " << worst_share * 100
        << "% of its bound";
    return out.str();
  }
  out << failures << " of " << count << " elements outside the bound; first:";
  for (std::size_t i = 0; i < first_failures.size() && i < max_listed; ++i) {
    const auto& m = first_failures[i];
    out << " [" << m.index << "] expected " << m.expected << " got " << m.actual << " (bound " << m.bound << ")";
  }
  return out.str();
}

std::uint64_t seed_from_environment() {
  if (const auto seed = env::whole("TANDEM_TEST_SEED")) return *seed;
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

namespace {

void same_size(const Buffer& a, const Buffer& b, const char* what) {
  if (a.size() != b.size()) {
    throw ShapeMismatch(std::string(what) + ": the buffers have " + std::to_string(a.size()) + " and " +
                        std::to_string(b.size()) + " elements");
  }
}

}  // namespace

Comparison compare(const Buffer& actual, const Buffer& expected, double rtol, double atol) {
  same_size(actual, expected, "verify::compare");
  if (!(rtol >= 0) || !(atol >= 0)) throw InvalidArgument("verify::compare: rtol and atol must be 0 or more");
  const detail::Host a = detail::download(actual), e = detail::download(expected);
  detail::Host bound(e.size());
  for (std::size_t i = 0; i < e.size(); ++i) bound[i] = atol + rtol * std::fabs(e[i]);
  return compare(a, e, bound);
}

}  // namespace tandem::verify

namespace tandem {

bool allclose(const Buffer& a, const Buffer& b, double rtol, double atol, bool equal_nan) {
  verify::same_size(a, b, "allclose");
  if (!(rtol >= 0) || !(atol >= 0)) throw InvalidArgument("allclose: rtol and atol must be 0 or more");
  const verify::detail::Host x = verify::detail::download(a), y = verify::detail::download(b);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) {
      if (!(equal_nan && std::isnan(x[i]) && std::isnan(y[i]))) return false;
    } else if (std::isinf(x[i]) || std::isinf(y[i])) {
      if (x[i] != y[i]) return false;
    } else if (!(std::fabs(x[i] - y[i]) <= atol + rtol * std::fabs(y[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace tandem
