// Distributed algorithms over a Communicator (see dist.hpp): linear regression on row shards and
// data-parallel MLP training, each rank a replica.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "mpi_host.hpp"
#include "tandem/environment.hpp"
#include "tandem/errors.hpp"

namespace tandem::dist {

using namespace internal;

ml::LinearModel fit_linear_regression(Communicator& comm, Backend& be, const data::Dataset& d) {
  d.check("distributed regression");
  const std::size_t p = d.cols;
  if (d.rows > 0 && d.targets.size() != d.rows) {
    throw InvalidArgument("distributed regression: " + d.source + " has no targets (one per row)");
  }
  // Every rank must agree on the number of features before anything is summed.
  std::vector<double> shape = {double(p), -double(p)};
  comm.allreduce(shape, Combine::max);
  if (shape[0] != -shape[1])
    throw ShapeMismatch("distributed regression: the ranks' data have different feature counts");
  // Global count and means of the columns and of y.
  std::vector<double> sums(p + 2, 0.0);
  for (std::size_t r = 0; r < d.rows; ++r) {
    for (std::size_t c = 0; c < p; ++c) sums[c] += d.features[r * p + c];
    sums[p] += d.targets[r];
  }
  sums[p + 1] = double(d.rows);
  comm.allreduce(sums, Combine::sum);
  const double n = sums[p + 1];
  if (n < double(p + 1)) {
    throw InvalidArgument("distributed regression: " + std::to_string(static_cast<long long>(n)) + " samples for " +
                          std::to_string(p + 1) + " coefficients; least squares needs at least as many samples");
  }
  std::vector<double> mean(p);
  for (std::size_t c = 0; c < p; ++c) mean[c] = sums[c] / n;
  const double y_mean = sums[p] / n;
  // This rank's [X - mean | y - y_mean] (rows, p + 1) and its Gram matrix (p + 1, p + 1), which
  // holds X^T X in its leading block and X^T y in its last column.
  std::vector<double> gram((p + 1) * (p + 1), 0.0);
  if (d.rows > 0) {
    std::vector<double> a(d.rows * (p + 1));
    for (std::size_t r = 0; r < d.rows; ++r) {
      for (std::size_t c = 0; c < p; ++c) a[r * (p + 1) + c] = d.features[r * p + c] - mean[c];
      a[r * (p + 1) + p] = d.targets[r] - y_mean;
    }
    const auto rows = static_cast<std::int64_t>(d.rows), cols = static_cast<std::int64_t>(p + 1);
    const Matrix am = matrix(Buffer::from(be, a), rows, cols);
    Matrix gm = matrix(Buffer(be, DType::f64, gram.size()), cols, cols);
    MatmulOptions o;
    o.trans_a = Transpose::yes;
    matmul(am, am, gm, o);
    gram = gm.buffer.to_vector<double>();
  }
  comm.allreduce(gram, Combine::sum);
  // Cholesky of D^-1 G D^-1 (D = sqrt(diag G)): scaling makes the pivots comparable.
  std::vector<double> scale(p), g(p * p), h(p);
  for (std::size_t c = 0; c < p; ++c) {
    const double diag = gram[c * (p + 1) + c];
    if (!(diag > 0)) {
      throw InvalidArgument("distributed regression: feature column " + std::to_string(c) +
                            " is constant over all ranks' rows; drop it");
    }
    scale[c] = std::sqrt(diag);
  }
  for (std::size_t i = 0; i < p; ++i) {
    for (std::size_t j = 0; j < p; ++j) g[i * p + j] = gram[i * (p + 1) + j] / (scale[i] * scale[j]);
    h[i] = gram[i * (p + 1) + p] / scale[i];
  }
  for (std::size_t j = 0; j < p; ++j) {  // g = L L^T, L in the lower triangle
    double diag = g[j * p + j];
    for (std::size_t k = 0; k < j; ++k) diag -= g[j * p + k] * g[j * p + k];
    if (!(diag > 1e-12)) {
      throw InvalidArgument("distributed regression: feature column " + std::to_string(j) +
                            " is a linear combination of the columns before it (rank-deficient data); drop it");
    }
    g[j * p + j] = std::sqrt(diag);
    for (std::size_t i = j + 1; i < p; ++i) {
      double v = g[i * p + j];
      for (std::size_t k = 0; k < j; ++k) v -= g[i * p + k] * g[j * p + k];
      g[i * p + j] = v / g[j * p + j];
    }
  }
  std::vector<double> z(p);
  for (std::size_t i = 0; i < p; ++i) {  // L z = h
    double v = h[i];
    for (std::size_t k = 0; k < i; ++k) v -= g[i * p + k] * z[k];
    z[i] = v / g[i * p + i];
  }
  ml::LinearModel model;
  model.coefficients.assign(p, 0.0);
  for (std::size_t ii = p; ii-- > 0;) {  // L^T b' = z, then b = D^-1 b'
    double v = z[ii];
    for (std::size_t k = ii + 1; k < p; ++k) v -= g[k * p + ii] * model.coefficients[k];
    model.coefficients[ii] = v / g[ii * p + ii];
  }
  for (std::size_t c = 0; c < p; ++c) model.coefficients[c] /= scale[c];
  model.intercept = y_mean;
  for (std::size_t c = 0; c < p; ++c) model.intercept -= mean[c] * model.coefficients[c];
  model.converged = true;
  return model;
}

std::uint64_t parameter_checksum(const ml::Mlp& model) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over every parameter's bytes
  for (const Buffer& p : model.parameters()) {
    std::vector<unsigned char> bytes(p.bytes());
    p.download_bytes(bytes.data(), bytes.size());
    for (unsigned char b : bytes) h = (h ^ b) * 1099511628211ull;
  }
  return h;
}

std::vector<ml::EpochReport> train(Communicator& comm, ml::Mlp& model, const data::Dataset& train_set,
                                   const data::Dataset* test, ml::TrainOptions options,
                                   const std::function<void(const ml::EpochReport&)>& on_epoch,
                                   const DataParallelOptions& parallel) {
  train_set.check("distributed train");
  if (test != nullptr) test->check("distributed train (the test set)");
  for (Buffer& p : model.parameters()) comm.broadcast(p, 0);
  options.replica = static_cast<std::size_t>(comm.rank());
  options.replicas = static_cast<std::size_t>(comm.size());
  // Each replica's gradient is the mean over its rows: weighted by its share of the batch, the
  // replicas' gradients sum to the batch's.
  auto weigh = [](std::vector<Buffer>& grads, std::size_t own_rows, std::size_t batch_rows) {
    if (own_rows == batch_rows || own_rows == 0) return;
    for (Buffer& g : grads) scale(double(own_rows) / double(batch_rows), g, g);
  };
  if (parallel.overlap && comm.size() > 1) {
    // Each layer's gradients are summed while backward computes the layers before; the step
    // waits for all of them. A replica with no rows ran no backward: it sends its zeros now.
    auto started = std::make_shared<bool>(false);
    options.gradients_ready = [&comm, weigh, started](ml::Mlp& m, std::size_t first, std::size_t count,
                                                      std::size_t own_rows, std::size_t batch_rows) {
      std::vector<Buffer> grads(m.gradients().begin() + std::ptrdiff_t(first),
                                m.gradients().begin() + std::ptrdiff_t(first + count));
      weigh(grads, own_rows, batch_rows);
      comm.start_allreduce(std::move(grads), Combine::sum);
      *started = true;
    };
    options.combine_gradients = [&comm, started](ml::Mlp& m, std::size_t, std::size_t) {
      if (!*started) {
        for (std::size_t i = m.gradients().size(); i >= 2; i -= 2) {
          comm.start_allreduce({m.gradients()[i - 2], m.gradients()[i - 1]}, Combine::sum);
        }
      }
      *started = false;
      comm.finish_allreduces();
    };
  } else {
    options.combine_gradients = [&comm, weigh, bucket = parallel.bucket_bytes](ml::Mlp& m, std::size_t own_rows,
                                                                               std::size_t batch_rows) {
      std::vector<Buffer> grads = m.gradients();  // handles: the reduction writes the model's gradients
      if (comm.size() == 1) return;
      weigh(grads, own_rows, batch_rows);
      comm.allreduce(grads, Combine::sum, bucket);
    };
  }
  options.sum_over_replicas = [&comm](double v) { return comm.allreduce(v, Combine::sum); };
  const bool checking = env::flag("TANDEM_DIST_CHECK");
  auto each_epoch = [&](const ml::EpochReport& rep) {
    if (checking) {
      const auto h = static_cast<double>(parameter_checksum(model) >> 11);  // exact in a double
      const double lo = -comm.allreduce(-h, Combine::max), hi = comm.allreduce(h, Combine::max);
      if (lo != hi) {
        throw DeviceError("data-parallel training: the replicas' parameters differ after epoch " +
                          std::to_string(rep.epoch) + " (rank " + std::to_string(comm.rank()) + ")");
      }
    }
    if (on_epoch) on_epoch(rep);
  };
  try {
    return ml::train(model, train_set, test, options, each_epoch);
  } catch (...) {
    // An error between a layer's started sum and the step: let the communication thread end
    // (the other ranks took part, or it is left pending) and keep the gradients as they are.
    try {
      comm.discard_allreduces();
    } catch (...) {
    }
    throw;
  }
}

}  // namespace tandem::dist
