// Multivariate linear regression with an intercept, on any backend: a closed-form least-squares
// solve and gradient-descent training, both built on the primitive ops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tandem/backend.hpp"
#include "tandem/data.hpp"

namespace tandem::ml {

enum class Solver {
  // Least squares through a QR factorisation (CholeskyQR2, see regression.cpp): one pass over the
  // data per Gram matrix, accurate for condition numbers up to about 1e8 in f64 (a shifted
  // third pass beyond that); rank-deficient data raises InvalidArgument naming the column.
  closed_form,
  // Full-batch or mini-batch gradient descent on the mean squared error.
  gradient_descent,
};

struct RegressionOptions {
  Solver solver = Solver::closed_form;
  DType dtype = DType::f64;  // compute type on the backend: f64 or f32
  // Gradient descent only:
  bool standardize = true;  // train on standardised features (coefficients are reported in the original units)
  double learning_rate = 0.1;
  std::size_t epochs = 1000;
  std::size_t batch_size = 0;  // 0: the full batch
  double tolerance = 1e-9;     // stop when an epoch lowers the loss by less than this share of it
  std::uint64_t seed = 1;      // mini-batch order
};

struct LinearModel {
  std::vector<double> coefficients;  // one per feature, in the units of the original features
  double intercept = 0;
  // Gradient descent: the training MSE of each epoch (the mean over its mini-batches).
  std::vector<double> loss_history;
  std::size_t epochs_run = 0;
  bool converged = false;  // gradient descent stopped on the tolerance (closed form: always true)
};

struct RegressionMetrics {
  double mse = 0;
  double r2 = 0;  // 1 - SS_res / SS_tot
};

// Fits y = X b + intercept to d (its targets are y). Throws InvalidArgument for data without
// targets, fewer samples than coefficients, rank-deficient features, or a diverging descent.
LinearModel fit_linear_regression(Backend& backend, const data::Dataset& d, const RegressionOptions& options = {});
// Predictions for every sample of d, computed on the backend in dtype.
std::vector<double> predict(Backend& backend, const LinearModel& model, const data::Dataset& d,
                            DType dtype = DType::f64);
// MSE and R^2 of the model on d (which needs targets).
RegressionMetrics evaluate(Backend& backend, const LinearModel& model, const data::Dataset& d,
                           DType dtype = DType::f64);

// A versioned binary file (magic "TANDEMLR") with a CRC-32. load raises IoError when the file
// cannot be read and DataError when it is not a linear model, is corrupt, truncated or of another
// version (naming the byte offset); save raises IoError.
void save(const LinearModel& model, const std::string& path);
LinearModel load_linear_model(const std::string& path);
std::vector<unsigned char> serialize(const LinearModel& model);
LinearModel deserialize_linear_model(const std::vector<unsigned char>& bytes, const std::string& source);

}  // namespace tandem::ml
