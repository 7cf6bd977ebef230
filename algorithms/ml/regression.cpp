// Linear regression with an intercept.
//
// closed_form: least squares by CholeskyQR2 (Yamamoto, Nakatsukasa, Yanagisawa, Fukaya 2015) on
// the centred data. Why not the normal equations: solving X^T X b = X^T y squares the condition
// number, so an f64 solve of data with cond(X) = 1e6 keeps only ~4 digits. Why not Householder QR:
// it goes over the data column by column (BLAS-2, p passes), which is slow on every backend and
// needs a primitive we do not have. CholeskyQR2 is two matmuls per pass: G = Q^T Q on the backend,
// its Cholesky factor R (p x p) on the host in f64, then Q <- Q R^-1 on the backend. The first pass
// leaves Q orthogonal to about cond(X)^2 u; the second repairs it to O(u), so Q R is as accurate
// as Householder's for cond(X) up to u^-1/2 (~1e8 in f64, ~4e3 in f32). When the first Cholesky
// breaks down (the Gram matrix is numerically singular), a shifted first pass (Fukaya et al. 2020,
// shifted CholeskyQR3) extends that to about u^-1; beyond it the data is rank deficient and we say
// which column. Columns are scaled to unit norm first, which costs nothing and removes the part of
// the conditioning that is only units.
//
// gradient_descent: full-batch or mini-batch steps on the MSE, data kept on the backend, mini-
// batches gathered there by index; the loss of every epoch is kept.
#include "tandem/regression.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>

#include "host_data.hpp"
#include "tandem/ops.hpp"

namespace tandem::ml {
namespace {

using detail::to_device;
using detail::to_host;
using detail::to_scalar;

// Dense p x p matrices on the host, row-major.
using Dense = std::vector<double>;

// Upper-triangular R with R^T R = A; false when a pivot falls to tol * max(a_jj, floor) or below
// (A is numerically singular; `failed` gets the column where it broke down). r_jj^2 is the
// squared distance of column j from the span of the columns before it.
bool cholesky_upper(const Dense& a, std::size_t p, double tol, double floor, Dense& r, std::size_t& failed) {
  r.assign(p * p, 0);
  for (std::size_t j = 0; j < p; ++j) {
    double d = a[j * p + j];
    for (std::size_t k = 0; k < j; ++k) d -= r[k * p + j] * r[k * p + j];
    if (!(d > tol * std::max(a[j * p + j], floor)) || !std::isfinite(d)) {
      failed = j;
      return false;
    }
    const double rjj = std::sqrt(d);
    r[j * p + j] = rjj;
    for (std::size_t i = j + 1; i < p; ++i) {
      double s = a[j * p + i];
      for (std::size_t k = 0; k < j; ++k) s -= r[k * p + j] * r[k * p + i];
      r[j * p + i] = s / rjj;
    }
  }
  return true;
}

// The inverse of an upper-triangular matrix (upper-triangular), column by column.
Dense invert_upper(const Dense& r, std::size_t p) {
  Dense inv(p * p, 0);
  for (std::size_t j = 0; j < p; ++j) {
    inv[j * p + j] = 1 / r[j * p + j];
    for (std::size_t ii = j; ii-- > 0;) {
      double s = 0;
      for (std::size_t k = ii + 1; k <= j; ++k) s += r[ii * p + k] * inv[k * p + j];
      inv[ii * p + j] = -s / r[ii * p + ii];
    }
  }
  return inv;
}

// x <- R^-1 x for upper-triangular R (back substitution).
void solve_upper(const Dense& r, std::size_t p, std::vector<double>& x) {
  for (std::size_t ii = p; ii-- > 0;) {
    double s = x[ii];
    for (std::size_t k = ii + 1; k < p; ++k) s -= r[ii * p + k] * x[k];
    x[ii] = s / r[ii * p + ii];
  }
}

// x <- R^-T x for upper-triangular R (forward substitution with R^T).
void solve_upper_transposed(const Dense& r, std::size_t p, std::vector<double>& x) {
  for (std::size_t i = 0; i < p; ++i) {
    double s = x[i];
    for (std::size_t k = 0; k < i; ++k) s -= r[k * p + i] * x[k];
    x[i] = s / r[i * p + i];
  }
}

void check_data(const data::Dataset& d, const char* what) {
  d.check(what);
  if (d.targets.size() != d.rows) {
    throw InvalidArgument(std::string(what) + ": the data set " + d.source +
                          " has no targets (give a target column or a target file)");
  }
  if (d.rows == 0 || d.cols == 0) throw InvalidArgument(std::string(what) + ": the data set is empty");
}

void check_dtype(DType t) {
  if (t != DType::f32 && t != DType::f64) {
    throw DTypeMismatch("linear regression computes in f32 or f64, not " + std::string(name_of(t)));
  }
}

// Column means of m (rows, cols) on the backend.
std::vector<double> column_means(const Matrix& m) {
  Buffer sums(m.buffer.backend(), m.buffer.dtype(), static_cast<std::size_t>(m.cols));
  reduce_cols(ReduceOp::sum, m, sums);
  std::vector<double> mean = to_host(sums);
  for (double& v : mean) v /= double(m.rows);
  return mean;
}

// Subtracts the column means in place; returns them.
std::vector<double> centre(Matrix& m) {
  std::vector<double> mean = column_means(m);
  std::vector<double> neg(mean.size());
  std::transform(mean.begin(), mean.end(), neg.begin(), [](double v) { return -v; });
  add_row_vector(m, to_device(m.buffer.backend(), neg, m.buffer.dtype()), m);
  return mean;
}

// The column scaling D (unit norms) from the Gram matrix g's diagonal, refusing a constant
// column: after centring it leaves only rounding (about sqrt(n) u max|x| in norm), which the unit
// scaling would blow up into a random direction; with an intercept its coefficient is not
// determined.
std::vector<double> column_scales(const data::Dataset& d, const Dense& g, double u) {
  const std::size_t pz = d.cols;
  std::vector<double> largest(pz, 0.0);
  for (std::size_t r = 0; r < d.rows; ++r) {
    for (std::size_t j = 0; j < pz; ++j) largest[j] = std::max(largest[j], std::fabs(d.features[r * pz + j]));
  }
  std::vector<double> scale(pz);
  for (std::size_t j = 0; j < pz; ++j) {
    scale[j] = std::sqrt(g[j * pz + j]);
    if (!(scale[j] > 16 * std::sqrt(double(d.rows)) * u * largest[j])) {
      throw InvalidArgument("linear regression: feature " + std::to_string(j) + " of " + d.source +
                            " is constant, so its coefficient and the intercept are not determined; drop it");
    }
  }
  return scale;
}

// Refinement (corrected semi-normal equations, Bjorck 1987) of z = D b for the centred x, y: Q =
// X R^-1 was formed with an explicit inverse, whose residual X - Q R grows with cond(X); refining
// with the residual of X itself, z += (R^T R)^-1 D^-1 X^T (y - X D^-1 z), recovers the accuracy of
// a backward-stable QR. Each step is two matmuls over the data; it stops when the correction is at
// rounding level.
void refine(const Matrix& x, const Matrix& y, const std::vector<Dense>& factors, const std::vector<double>& scale,
            double u, std::vector<double>& z) {
  Backend& be = x.buffer.backend();
  const DType dt = x.buffer.dtype();
  const std::size_t pz = scale.size();
  const std::int64_t p = x.cols;
  Matrix resid = matrix(Buffer(be, dt, static_cast<std::size_t>(x.rows)), x.rows, 1);
  Matrix xtr = matrix(Buffer(be, dt, pz), p, 1);
  for (int step = 0; step < 4; ++step) {
    std::vector<double> b(pz);
    for (std::size_t j = 0; j < pz; ++j) b[j] = z[j] / scale[j];
    resid.buffer.copy_from(y.buffer);
    matmul(x, matrix(to_device(be, b, dt), p, 1), resid, {.alpha = -1, .beta = 1});
    matmul(x, resid, xtr, {.trans_a = Transpose::yes});
    std::vector<double> v = to_host(xtr.buffer);
    for (std::size_t j = 0; j < pz; ++j) v[j] /= scale[j];
    for (const Dense& r : factors) solve_upper_transposed(r, pz, v);
    for (auto it = factors.rbegin(); it != factors.rend(); ++it) solve_upper(*it, pz, v);
    double dz = 0, zz = 0;
    for (std::size_t j = 0; j < pz; ++j) {
      z[j] += v[j];
      dz = std::max(dz, std::fabs(v[j]));
      zz = std::max(zz, std::fabs(z[j]));
    }
    if (!(dz > 4 * u * zz)) break;
  }
}

LinearModel closed_form(Backend& be, const data::Dataset& d, DType dt) {
  const auto n = static_cast<std::int64_t>(d.rows), p = static_cast<std::int64_t>(d.cols);
  const auto pz = d.cols;
  if (d.rows < d.cols + 1) {
    throw InvalidArgument("linear regression: " + std::to_string(d.rows) + " samples cannot determine " +
                          std::to_string(d.cols) + " coefficients and an intercept; it needs at least " +
                          std::to_string(d.cols + 1));
  }
  Matrix x = matrix(to_device(be, d.features, dt), n, p);
  Matrix y = matrix(to_device(be, d.targets, dt), n, 1);
  const std::vector<double> x_mean = centre(x);
  const double y_mean = centre(y)[0];

  // Column scaling D (unit norms), from the Gram matrix's diagonal.
  Matrix gram = matrix(Buffer(be, dt, pz * pz), p, p);
  matmul(x, x, gram, {.trans_a = Transpose::yes});
  Dense g = to_host(gram.buffer);
  const double u = dt == DType::f64 ? 0x1p-53 : 0x1p-24;  // unit roundoff
  const std::vector<double> scale = column_scales(d, g, u);

  // Q starts as X; each pass: G = Q^T Q, R = chol(G [+ shift]), Q <- Q R^-1. The factors are kept
  // so that X_centred = Q R_k ... R_1 D.
  std::vector<Dense> factors;
  bool shifted = false;
  // x stays (the refinement below needs it). The last pass's Q is never formed: only Q^T y is
  // needed, and Q_k^T y = R_k^-T Q_{k-1}^T y.
  Matrix q = x;
  std::vector<Buffer> formed;
  for (int pass = 0; pass < (shifted ? 3 : 2); ++pass) {
    if (pass > 0) {
      matmul(q, q, gram, {.trans_a = Transpose::yes});
      g = to_host(gram.buffer);
    } else {
      for (std::size_t i = 0; i < pz; ++i) {
        for (std::size_t j = 0; j < pz; ++j) g[i * pz + j] /= scale[i] * scale[j];
      }
    }
    Dense r;
    std::size_t failed = 0;
    // First pass (unit columns): a pivot within rounding of zero means the unshifted
    // factorisation would lose everything. Later passes see a Q whose columns have norm ~1 unless
    // X lacks that direction entirely (to working precision): the test is then absolute.
    const bool ok = pass == 0 ? cholesky_upper(g, pz, 10 * double(pz) * u, 0.0, r, failed)
                              : cholesky_upper(g, pz, 10 * double(pz) * u, 1.0, r, failed);
    if (!ok) {
      if (pass == 0 && !shifted) {
        // ||G||_2 <= trace(G) = p for unit columns; the shift of Fukaya et al. keeps the
        // factorisation alive, and the later passes remove its effect.
        const double shift = 11 * (double(d.rows) * double(pz) + double(pz) * double(pz + 1)) * u * double(pz);
        Dense gs = g;
        for (std::size_t j = 0; j < pz; ++j) gs[j * pz + j] += shift;
        shifted = cholesky_upper(gs, pz, 0.0, 0.0, r, failed);
      }
      if (!shifted || pass > 0) {
        throw InvalidArgument("linear regression: the features of " + d.source +
                              " are linearly dependent (rank deficient) near feature " + std::to_string(failed) +
                              ", so the least-squares solution is not unique; drop or combine that feature" +
                              (dt == DType::f32 ? ", or compute in f64" : ""));
      }
    }
    factors.push_back(r);
    if (pass + 1 == (shifted ? 3 : 2)) break;
    // Q <- Q (D^-1) R^-1 on the backend (the first pass folds the column scaling in).
    Dense m = invert_upper(r, pz);
    if (pass == 0) {
      for (std::size_t i = 0; i < pz; ++i) {
        for (std::size_t j = 0; j < pz; ++j) m[i * pz + j] /= scale[i];
      }
    }
    formed.emplace_back(be, dt, d.rows * pz);
    Matrix next = matrix(formed.back(), n, p);
    matmul(q, matrix(to_device(be, m, dt), p, p), next);
    q = next;
  }

  // z = D b = R_1^-1 ... R_k^-1 Q_k^T y, with Q_k^T y = R_k^-T Q_{k-1}^T y.
  Matrix qty = matrix(Buffer(be, dt, pz), p, 1);
  matmul(q, y, qty, {.trans_a = Transpose::yes});
  std::vector<double> z = to_host(qty.buffer);
  solve_upper_transposed(factors.back(), pz, z);
  for (auto it = factors.rbegin(); it != factors.rend(); ++it) solve_upper(*it, pz, z);

  refine(x, y, factors, scale, u, z);
  std::vector<double> b(pz);
  for (std::size_t j = 0; j < pz; ++j) b[j] = z[j] / scale[j];

  LinearModel model;
  model.coefficients = b;
  model.intercept = y_mean - std::inner_product(b.begin(), b.end(), x_mean.begin(), 0.0);
  model.converged = true;
  return model;
}

LinearModel gradient_descent(Backend& be, const data::Dataset& d, const RegressionOptions& o) {
  if (!(o.learning_rate > 0) || !std::isfinite(o.learning_rate)) {
    throw InvalidArgument("linear regression: the learning rate must be positive, not " +
                          std::to_string(o.learning_rate));
  }
  if (o.epochs == 0) throw InvalidArgument("linear regression: epochs must be at least 1");
  if (d.rows > std::size_t(std::numeric_limits<std::int32_t>::max())) {
    throw InvalidArgument("linear regression: mini-batch indices are i32; the data set has too many samples");
  }
  const DType dt = o.dtype;
  data::Dataset work = d;
  data::Standardizer st;
  if (o.standardize) {
    st = data::Standardizer::fit(work);
    st.apply(work);
  }
  const auto n = static_cast<std::int64_t>(d.rows), p = static_cast<std::int64_t>(d.cols);
  const std::size_t batch = o.batch_size == 0 ? d.rows : std::min(o.batch_size, d.rows);
  const std::size_t batches = (d.rows + batch - 1) / batch;
  const bool full = batches == 1;

  Matrix x = matrix(to_device(be, work.features, dt), n, p);
  Matrix y = matrix(to_device(be, work.targets, dt), n, 1);
  Matrix w = matrix(Buffer(be, dt, d.cols), p, 1);
  Buffer bias(be, dt, 1), total(be, dt, 1), losses(be, dt, batches);
  fill(w.buffer, 0);
  fill(bias, 0);
  Buffer xb_buf(be, dt, batch * d.cols), yb_buf(be, dt, batch), pred_buf(be, dt, batch), resid(be, dt, batch);
  Buffer index(be, DType::i32, d.rows);
  data::Rng rng(o.seed);

  double initial_loss = 0;
  for (double t : work.targets) initial_loss += t * t / double(d.rows);
  LinearModel model;
  for (std::size_t epoch = 0; epoch < o.epochs; ++epoch) {
    if (!full) {
      const std::vector<std::size_t> order = rng.permutation(d.rows);
      const std::vector<std::int32_t> idx(order.begin(), order.end());
      index.upload(idx);
    }
    std::vector<double> weights(batches);
    for (std::size_t k = 0; k < batches; ++k) {
      const std::size_t start = k * batch, rows = std::min(batch, d.rows - start);
      const auto r = static_cast<std::int64_t>(rows);
      Matrix xb = full ? x : matrix(xb_buf.slice(0, rows * d.cols), r, p);
      Matrix yb = full ? y : matrix(yb_buf.slice(0, rows), r, 1);
      if (!full) {
        const Buffer idx = index.slice(start, rows);
        gather_rows(x, idx, xb);
        gather_rows(y, idx, yb);
      }
      Matrix pred = matrix(pred_buf.slice(0, rows), r, 1);
      matmul(xb, w, pred);
      add_row_vector(pred, bias, pred);
      Buffer res = resid.slice(0, rows);
      sub(pred.buffer, yb.buffer, res);
      Buffer loss = losses.slice(k, 1);
      mse(pred.buffer, yb.buffer, loss);
      // d MSE / dw = 2/B X^T r, d MSE / db = 2/B sum r; the step folds into the matmul's beta.
      const double step = -o.learning_rate * 2 / double(rows);
      matmul(xb, matrix(res, r, 1), w, {.trans_a = Transpose::yes, .alpha = step, .beta = 1});
      reduce(ReduceOp::sum, res, total);
      axpy(step, total, bias);
      weights[k] = double(rows) / double(d.rows);
    }
    const std::vector<double> batch_losses = to_host(losses);
    const double loss = std::inner_product(batch_losses.begin(), batch_losses.end(), weights.begin(), 0.0);
    // From w = 0 the loss starts at mean(y^2); a descent that is 100x above it is diverging
    // (the loss would reach Inf only after hundreds of epochs).
    if (!std::isfinite(loss) || loss > 100 * initial_loss) {
      throw InvalidArgument("linear regression: gradient descent diverged at epoch " + std::to_string(epoch + 1) +
                            " (the loss is " + std::to_string(loss) + "); lower the learning rate (it is " +
                            std::to_string(o.learning_rate) + ")" +
                            (o.standardize ? "" : " or standardise the features"));
    }
    const double previous =
        model.loss_history.empty() ? std::numeric_limits<double>::infinity() : model.loss_history.back();
    model.loss_history.push_back(loss);
    model.epochs_run = epoch + 1;
    if (std::isfinite(previous) && previous - loss >= 0 && previous - loss <= o.tolerance * previous) {
      model.converged = true;
      break;
    }
  }
  // Back to the original units: w_s (x - mean) / scale + b = (w_s / scale) x + (b - sum w_s mean / scale).
  std::vector<double> ws = to_host(w.buffer);
  double b = to_scalar(bias);
  if (o.standardize) {
    for (std::size_t j = 0; j < d.cols; ++j) {
      ws[j] /= st.scale[j];
      b -= ws[j] * st.mean[j];
    }
  }
  model.coefficients = ws;
  model.intercept = b;
  return model;
}

// Values whose squares overflow or underflow the compute type make the solvers report a rank
// deficiency or a constant column that is not there: said as what it is, with the column.
void check_range(const data::Dataset& d, DType t) {
  const double big = t == DType::f32 ? 1e18 : 1e150, small = t == DType::f32 ? 1e-18 : 1e-150;
  const auto judge = [&](double largest, const std::string& what) {
    if (largest > big || (largest > 0 && largest < small)) {
      char text[160];
      std::snprintf(text, sizeof text, "%s reaches |x| = %.3g, whose square %s in %s; rescale it (e.g. divide by %.3g)",
                    what.c_str(), largest, largest > big ? "overflows" : "underflows", std::string(name_of(t)).c_str(),
                    largest);
      throw InvalidArgument("linear regression: " + d.source + ": " + text);
    }
  };
  for (std::size_t j = 0; j < d.cols; ++j) {
    double largest = 0;
    for (std::size_t i = 0; i < d.rows; ++i) largest = std::max(largest, std::fabs(d.features[i * d.cols + j]));
    judge(largest, "feature " + std::to_string(j));
  }
  double largest = 0;
  for (double y : d.targets) largest = std::max(largest, std::fabs(y));
  judge(largest, "the target");
}

}  // namespace

LinearModel fit_linear_regression(Backend& be, const data::Dataset& d, const RegressionOptions& o) {
  check_data(d, "linear regression");
  check_dtype(o.dtype);
  check_range(d, o.dtype);
  return o.solver == Solver::closed_form ? closed_form(be, d, o.dtype) : gradient_descent(be, d, o);
}

std::vector<double> predict(Backend& be, const LinearModel& model, const data::Dataset& d, DType dtype) {
  d.check("predict");
  check_dtype(dtype);
  if (model.coefficients.size() != d.cols) {
    throw ShapeMismatch("predict: the model has " + std::to_string(model.coefficients.size()) +
                        " coefficients, the data set " + std::to_string(d.cols) + " features");
  }
  if (d.rows == 0) return {};
  const auto n = static_cast<std::int64_t>(d.rows), p = static_cast<std::int64_t>(d.cols);
  Matrix x = matrix(to_device(be, d.features, dtype), n, p);
  Matrix pred = matrix(Buffer(be, dtype, d.rows), n, 1);
  matmul(x, matrix(to_device(be, model.coefficients, dtype), p, 1), pred);
  const double intercept[] = {model.intercept};
  add_row_vector(pred, to_device(be, intercept, dtype), pred);
  return to_host(pred.buffer);
}

RegressionMetrics evaluate(Backend& be, const LinearModel& model, const data::Dataset& d, DType dtype) {
  check_data(d, "evaluate");
  const std::vector<double> pred = predict(be, model, d, dtype);
  Buffer p = to_device(be, pred, dtype), y = to_device(be, d.targets, dtype), result(be, dtype, 1);
  RegressionMetrics m;
  mse(p, y, result);
  m.mse = to_scalar(result);
  // SS_tot / n: the MSE of predicting the mean.
  Buffer mean(be, dtype, d.rows);
  fill(mean, sum(y) / double(d.rows));
  mse(y, mean, result);
  const double var = to_scalar(result);
  m.r2 = var > 0 ? 1 - m.mse / var : std::numeric_limits<double>::quiet_NaN();
  return m;
}

}  // namespace tandem::ml
