// Linear regression on the backend under test: the closed form against an independent float64
// Householder QR solve (here, on the host), on real and on ill-conditioned data; gradient descent
// against the closed form; bad input.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ml_support.hpp"
#include "tandem/regression.hpp"

namespace {

using namespace tandem;

// Least squares with intercept by Householder QR of [1 | X] in float64: the oracle.
std::vector<double> householder_least_squares(const data::Dataset& d) {
  const std::size_t n = d.rows, p = d.cols + 1;
  std::vector<double> a(n * p), y = d.targets;
  for (std::size_t r = 0; r < n; ++r) {
    a[r * p] = 1;
    for (std::size_t c = 0; c < d.cols; ++c) a[r * p + c + 1] = d.features[r * d.cols + c];
  }
  for (std::size_t k = 0; k < p; ++k) {
    double norm = 0;
    for (std::size_t r = k; r < n; ++r) norm += a[r * p + k] * a[r * p + k];
    norm = std::sqrt(norm);
    const double alpha = a[k * p + k] > 0 ? -norm : norm;
    std::vector<double> v(n, 0);
    for (std::size_t r = k; r < n; ++r) v[r] = a[r * p + k];
    v[k] -= alpha;
    double vv = 0;
    for (std::size_t r = k; r < n; ++r) vv += v[r] * v[r];
    if (vv == 0) continue;
    for (std::size_t c = k; c < p; ++c) {
      double s = 0;
      for (std::size_t r = k; r < n; ++r) s += v[r] * a[r * p + c];
      for (std::size_t r = k; r < n; ++r) a[r * p + c] -= 2 * s / vv * v[r];
    }
    double s = 0;
    for (std::size_t r = k; r < n; ++r) s += v[r] * y[r];
    for (std::size_t r = k; r < n; ++r) y[r] -= 2 * s / vv * v[r];
  }
  std::vector<double> b(p);
  for (std::size_t k = p; k-- > 0;) {
    double s = y[k];
    for (std::size_t c = k + 1; c < p; ++c) s -= a[k * p + c] * b[c];
    b[k] = s / a[k * p + k];
  }
  return b;  // b[0] is the intercept
}

// The largest |got - want| / |want| over coefficients and intercept.
double worst_relative(const ml::LinearModel& m, const std::vector<double>& want) {
  double worst = std::fabs(m.intercept - want[0]) / std::fabs(want[0]);
  for (std::size_t j = 0; j < m.coefficients.size(); ++j) {
    worst = std::max(worst, std::fabs(m.coefficients[j] - want[j + 1]) / std::fabs(want[j + 1]));
  }
  return worst;
}

data::Dataset diabetes() {
  data::Dataset d = data::read_csv(test::data_file("diabetes_data_raw.csv.gz"));
  data::attach_targets(d, data::read_csv(test::data_file("diabetes_target.csv.gz")));
  return d;
}

}  // namespace

TEST_CASE("regression: closed form on the diabetes data matches a float64 Householder solve to 1e-6") {
  Backend* be = test::backend_or_skip();
  if (!be) return;
  if (!test::shipped_data_or_skip()) return;
  const data::Dataset d = diabetes();
  const std::vector<double> want = householder_least_squares(d);
  const ml::LinearModel m = ml::fit_linear_regression(*be, d);
  const double worst = worst_relative(m, want);
  INFO("worst relative error ", worst);
  CHECK(worst < 1e-6);
  // R^2 of ordinary least squares on the whole diabetes data, as every statistics package reports it.
  const ml::RegressionMetrics metrics = ml::evaluate(*be, m, d);
  CHECK(metrics.r2 == doctest::Approx(0.5177).epsilon(1e-3));
  const std::vector<double> pred = ml::predict(*be, m, d);
  CHECK(pred.size() == d.rows);
}

TEST_CASE("regression: closed form stays accurate on ill-conditioned data (cond ~1e7)") {
  Backend* be = test::backend_or_skip();
  if (!be) return;
  // Columns 1 and 2 differ by 1e-7 relative noise: the normal equations would square cond to
  // ~1e14 and keep ~2 digits in f64; a QR keeps ~9. y is exactly linear in the features (a
  // residual would add a cond^2 u term that no backward-stable method, Householder included, avoids).
  data::Rng rng(test::seed());
  data::Dataset d;
  d.rows = 400;
  d.cols = 4;
  d.source = "synthetic";
  for (std::size_t r = 0; r < d.rows; ++r) {
    const double a = rng.normal(), b = rng.normal(), c = rng.normal();
    const double row[] = {a, a + 1e-7 * rng.normal(), b * 1000, c};
    d.features.insert(d.features.end(), row, row + 4);
    d.targets.push_back(3 + row[0] - 2 * row[1] + 0.5e-3 * row[2] + 4 * row[3]);
  }
  const std::vector<double> want = householder_least_squares(d);
  const ml::LinearModel m = ml::fit_linear_regression(*be, d);
  const double worst = worst_relative(m, want);
  INFO("worst relative error ", worst);
  CHECK(worst < 1e-6);
  CHECK(worst_relative(m, {3, 1, -2, 0.5e-3, 4}) < 1e-6);
}

TEST_CASE("regression: gradient descent reaches the closed form and the loss history falls") {
  Backend* be = test::backend_or_skip();
  if (!be) return;
  data::Rng rng(test::seed() + 1);
  data::Dataset d;
  d.rows = 1000;
  d.cols = 3;
  d.source = "synthetic";
  for (std::size_t r = 0; r < d.rows; ++r) {
    const double row[] = {rng.normal() * 10 + 5, rng.normal(), rng.normal() * 0.1};
    d.features.insert(d.features.end(), row, row + 3);
    d.targets.push_back(1 + 0.5 * row[0] - 2 * row[1] + 3 * row[2] + 0.1 * rng.normal());
  }
  const ml::LinearModel exact = ml::fit_linear_regression(*be, d);
  ml::RegressionOptions o;
  o.solver = ml::Solver::gradient_descent;
  o.epochs = 2000;
  o.tolerance = 1e-12;
  const ml::LinearModel full = ml::fit_linear_regression(*be, d, o);
  CHECK(full.converged);
  REQUIRE(full.loss_history.size() == full.epochs_run);
  for (std::size_t e = 1; e < full.loss_history.size(); ++e) CHECK(full.loss_history[e] <= full.loss_history[e - 1]);
  for (std::size_t j = 0; j < 3; ++j) CHECK(full.coefficients[j] == doctest::Approx(exact.coefficients[j]).epsilon(1e-4));
  CHECK(full.intercept == doctest::Approx(exact.intercept).epsilon(1e-4));

  o.batch_size = 64;
  o.epochs = 30;
  o.learning_rate = 0.02;
  const ml::LinearModel mini = ml::fit_linear_regression(*be, d, o);
  CHECK(mini.loss_history.back() < 0.1 * mini.loss_history.front());
  for (std::size_t j = 0; j < 3; ++j) CHECK(mini.coefficients[j] == doctest::Approx(exact.coefficients[j]).epsilon(0.05));
  const ml::LinearModel again = ml::fit_linear_regression(*be, d, o);
  CHECK(again.loss_history == mini.loss_history);  // the same seed, the same batches

  o.batch_size = 0;
  o.learning_rate = 10;
  o.standardize = false;
  CHECK_THROWS_WITH_AS(ml::fit_linear_regression(*be, d, o), doctest::Contains("lower the learning rate"),
                       InvalidArgument);
}

TEST_CASE("regression: bad input") {
  Backend* be = test::backend_or_skip();
  if (!be) return;
  data::Dataset d = data::parse_csv("1,2,5\n2,4,6\n3,6,7\n4,8.5,9\n", "dependent.csv", {.label_column = -1});
  // Column 1 is 2 x column 0 except in the last row: fine. Make it exact: rank deficient.
  d.features[7] = 8;
  CHECK_THROWS_WITH_AS(ml::fit_linear_regression(*be, d), doctest::Contains("linearly dependent"), InvalidArgument);
  data::Dataset c = data::parse_csv("1,7,5\n2,7,6\n3,7,8\n", "constant.csv", {.label_column = -1});
  CHECK_THROWS_WITH_AS(ml::fit_linear_regression(*be, c), doctest::Contains("feature 1 of constant.csv is constant"),
                       InvalidArgument);
  // 0.1 is not exact in binary: centring leaves rounding, which is still a constant column.
  data::Dataset tenth = data::parse_csv("1,0.1,5\n2,0.1,6\n3,0.1,8\n4,0.1,9\n", "tenth.csv", {.label_column = -1});
  CHECK_THROWS_WITH_AS(ml::fit_linear_regression(*be, tenth), doctest::Contains("feature 1 of tenth.csv is constant"),
                       InvalidArgument);
  data::Dataset few = data::parse_csv("1,2,5\n2,3,6\n", "few.csv", {.label_column = -1});
  CHECK_THROWS_WITH_AS(ml::fit_linear_regression(*be, few), doctest::Contains("at least 3"), InvalidArgument);
  data::Dataset none = data::parse_csv("1,2\n3,4\n", "none.csv");
  CHECK_THROWS_WITH_AS(ml::fit_linear_regression(*be, none), doctest::Contains("has no targets"), InvalidArgument);
  ml::RegressionOptions o;
  o.dtype = DType::bf16;
  CHECK_THROWS_AS(ml::fit_linear_regression(*be, d, o), DTypeMismatch);
  ml::LinearModel m;
  m.coefficients = {1};
  CHECK_THROWS_AS(ml::predict(*be, m, d), ShapeMismatch);
}
