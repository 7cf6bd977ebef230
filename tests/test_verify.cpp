// The oracle is tested too: the comparison catches a planted wrong element, unwritten (poisoned)
// outputs and writes into the guard zones, and seeds replay.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

#include "../algorithms/verify/harness.hpp"
#include "tandem/tandem.hpp"
#include "tandem/verify.hpp"

using namespace tandem;
using namespace tandem::verify;
namespace harness = tandem::verify::detail;

TEST_CASE("compare catches a planted wrong element and reports where") {
  std::vector<double> expected(1000), bound(1000, 1e-6);
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = std::sin(double(i));
  std::vector<double> actual = expected;
  CHECK(compare(actual, expected, bound).ok());
  actual[617] += 2e-6;  // twice its bound
  const Comparison c = compare(actual, expected, bound);
  CHECK_FALSE(c.ok());
  CHECK(c.failures == 1);
  CHECK(c.worst_index == 617);
  CHECK(c.worst_share == doctest::Approx(2.0).epsilon(1e-6));
  REQUIRE(c.first_failures.size() == 1);
  CHECK(c.first_failures[0].index == 617);
  CHECK(c.describe().find("[617]") != std::string::npos);
  actual[617] = expected[617] + 0.5e-6;  // inside the bound
  CHECK(compare(actual, expected, bound).ok());
}

TEST_CASE("NaN and Inf must match exactly, and a zero bound means exact") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> zero(3, 0.0);
  CHECK(compare(std::vector<double>{nan, inf, 1}, std::vector<double>{nan, inf, 1}, zero).ok());
  CHECK_FALSE(compare(std::vector<double>{1, inf, 1}, std::vector<double>{nan, inf, 1}, zero).ok());
  CHECK_FALSE(compare(std::vector<double>{nan, inf, 1}, std::vector<double>{1, inf, 1}, zero).ok());
  CHECK_FALSE(compare(std::vector<double>{nan, -inf, 1}, std::vector<double>{nan, inf, 1}, zero).ok());
  CHECK_FALSE(compare(std::vector<double>{nan, inf, std::nextafter(1.0, 2.0)}, std::vector<double>{nan, inf, 1}, zero).ok());
}

TEST_CASE("an output the op never wrote stays poisoned and fails") {
  Backend& be = get_backend("reference");
  harness::Output out = harness::make_output(be, DType::f32, 100);
  std::vector<float> partial(99, 1.0f);
  out.inner.slice(0, 99).upload(partial);  // element 99 left unwritten
  CaseResult r;
  harness::finish(r, out, std::vector<double>(100, 1.0), std::vector<double>(100, 1e-3));
  CHECK_FALSE(r.passed());
  CHECK(r.comparison.failures == 1);
  CHECK(r.comparison.first_failures[0].index == 99);
  CHECK(r.guard_failure.empty());
}

TEST_CASE("a write past the end of an output hits the guard zone") {
  Backend& be = get_backend("reference");
  harness::Output out = harness::make_output(be, DType::f64, 10);
  out.inner.fill(1.0);
  CHECK(harness::check_guards(out).empty());
  Buffer past_end = out.whole.slice(harness::kGuard + 10, 1);
  past_end.fill(1.0);
  CHECK(harness::check_guards(out).find("after the output") != std::string::npos);
  harness::Output before = harness::make_output(be, DType::i32, 5);
  before.whole.slice(harness::kGuard - 1, 1).fill(0);
  CHECK(harness::check_guards(before).find("before the output") != std::string::npos);
}

TEST_CASE("bounds follow the error analysis") {
  CHECK(unit_roundoff(DType::f32) == std::ldexp(1.0, -24));
  CHECK(unit_roundoff(DType::f64) == std::ldexp(1.0, -53));
  CHECK(gamma(10, 0.01) == doctest::Approx(0.1 / 0.9));
  CHECK(std::isinf(gamma(200, 0.01)));
}

TEST_CASE("the same seed replays the same inputs and TANDEM_TEST_SEED is read") {
  CheckCase c{"reduce", "sum", "-", "f32", "10", {}};
  auto r1 = harness::case_rng(42, c), r2 = harness::case_rng(42, c), r3 = harness::case_rng(43, c);
  const auto a = harness::random_values(r1, DType::f32, 10), b = harness::random_values(r2, DType::f32, 10),
             d = harness::random_values(r3, DType::f32, 10);
  CHECK(a == b);
  CHECK(a != d);
  const char* saved = std::getenv("TANDEM_TEST_SEED");
  const std::string keep = saved ? saved : "";
  ::setenv("TANDEM_TEST_SEED", "12345", 1);
  CHECK(seed_from_environment() == 12345);
  ::setenv("TANDEM_TEST_SEED", "abc", 1);
  CHECK_THROWS_AS(seed_from_environment(), InvalidArgument);
  if (saved) {
    ::setenv("TANDEM_TEST_SEED", keep.c_str(), 1);
  } else {
    ::unsetenv("TANDEM_TEST_SEED");
  }
}
