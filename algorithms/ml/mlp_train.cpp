// Training and evaluating an MLP on a data set: mini-batches from device-resident data or streamed
// through pinned staging, per-epoch reports, held-out loss and accuracy.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>

#include "host_data.hpp"
#include "tandem/errors.hpp"
#include "tandem/mlp.hpp"
#include "tandem/profile.hpp"

namespace tandem::ml {

using detail::to_device;
using detail::to_host;

namespace {

// Values the model's dtype cannot hold become Inf on the backend, and the loss NaN: said here,
// with the place, rather than blamed on the learning rate after an epoch.
void check_fits(const std::vector<double>& v, std::size_t cols, DType dt, const std::string& what,
                const data::Dataset& d) {
  const double limit =
      dt == DType::f32 ? double(std::numeric_limits<float>::max()) : std::numeric_limits<double>::max();
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!(std::fabs(v[i]) <= limit)) {
      char text[160];
      std::snprintf(text, sizeof text, " of %.3g (sample %zu, column %zu), beyond the %.3g that ", v[i], i / cols + 1,
                    i % cols + 1, limit);
      throw DataError(d.source + " holds a " + what + text + std::string(name_of(dt)) + " holds" +
                      (what == "feature" ? "; standardise the features (the default) or rescale them" : ""));
    }
  }
}

// The model's targets for a data set: one-hot rows (classification) or the values (MSE).
std::vector<double> target_rows(const Mlp& model, const data::Dataset& d, std::vector<std::int32_t>& labels) {
  const std::size_t out = model.outputs();
  if (d.targets.size() != d.rows) throw InvalidArgument("train: the data set " + d.source + " has no targets");
  check_fits(d.features, d.cols, model.options().dtype, "feature", d);
  if (model.options().loss == LossKind::softmax_cross_entropy) {
    labels = d.class_labels();
    std::vector<double> onehot(d.rows * out, 0);
    for (std::size_t r = 0; r < d.rows; ++r) {
      if (static_cast<std::size_t>(labels[r]) >= out) {
        throw InvalidArgument("train: sample " + std::to_string(r) + " of " + d.source + " has class " +
                              std::to_string(labels[r]) + ", but the model has " + std::to_string(out) +
                              " outputs; make the last width at least " + std::to_string(labels[r] + 1));
      }
      onehot[r * out + std::size_t(labels[r])] = 1;
    }
    return onehot;
  }
  if (out != 1) {
    throw InvalidArgument("train: an MSE model on a data set with one target needs 1 output, not " +
                          std::to_string(out));
  }
  check_fits(d.targets, 1, model.options().dtype, "target", d);
  labels.assign(d.rows, 0);
  return d.targets;
}

// The data set on the backend: features, targets, labels.
struct DeviceData {
  Matrix x, t, labels;
};

DeviceData upload(Mlp& model, const data::Dataset& d) {
  if (d.cols != model.inputs()) {
    throw ShapeMismatch("train: the model takes " + std::to_string(model.inputs()) + " features, " + d.source +
                        " has " + std::to_string(d.cols));
  }
  if (d.rows > std::size_t(std::numeric_limits<std::int32_t>::max())) {
    throw InvalidArgument("train: batch indices are i32; the data set has too many samples");
  }
  std::vector<std::int32_t> labels;
  const std::vector<double> t = target_rows(model, d, labels);
  Backend& be = model.backend();
  const DType dt = model.options().dtype;
  const auto n = static_cast<std::int64_t>(d.rows);
  DeviceData dd;
  dd.x = matrix(to_device(be, d.features, dt), n, static_cast<std::int64_t>(d.cols));
  dd.t = matrix(to_device(be, t, dt), n, static_cast<std::int64_t>(model.outputs()));
  dd.labels = matrix(Buffer::from(be, labels), n, 1);
  return dd;
}

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

namespace detail {
// While alive, the model's backward() passes LabelCheck::trusted: no read-back per batch.
class TrustLabels {
 public:
  explicit TrustLabels(Mlp& model) : model_(model), before_(model.label_check_) {
    model.label_check_ = LabelCheck::trusted;
  }
  ~TrustLabels() { model_.label_check_ = before_; }
  TrustLabels(const TrustLabels&) = delete;
  TrustLabels& operator=(const TrustLabels&) = delete;

 private:
  Mlp& model_;
  LabelCheck before_;
};
}  // namespace detail

Evaluation evaluate(Mlp& model, const data::Dataset& d, std::size_t batch_size) {
  d.check("evaluate");
  if (d.rows == 0) throw InvalidArgument("evaluate: the data set is empty");
  if (batch_size == 0) throw InvalidArgument("evaluate: the batch size must be at least 1");
  if (d.cols != model.inputs()) {
    throw ShapeMismatch("evaluate: the model takes " + std::to_string(model.inputs()) + " features, " + d.source +
                        " has " + std::to_string(d.cols));
  }
  // Chunk by chunk from the host: the data set need not fit on the device.
  Backend& be = model.backend();
  const DType dt = model.options().dtype;
  std::vector<std::int32_t> labels;
  const std::vector<double> targets = target_rows(model, d, labels);
  const std::size_t out = model.outputs();
  const bool classify = model.options().loss == LossKind::softmax_cross_entropy;
  double loss = 0;
  std::size_t correct = 0;
  for (std::size_t start = 0; start < d.rows; start += batch_size) {
    const std::size_t rows = std::min(batch_size, d.rows - start);
    const auto r = static_cast<std::int64_t>(rows);
    const Matrix xb = matrix(to_device(be, std::span(d.features).subspan(start * d.cols, rows * d.cols), dt), r,
                             static_cast<std::int64_t>(d.cols));
    const Matrix tb = matrix(to_device(be, std::span(targets).subspan(start * out, rows * out), dt), r,
                             static_cast<std::int64_t>(out));
    const Buffer lb = Buffer::from(be, std::span<const std::int32_t>(labels).subspan(start, rows));
    const Matrix& y = model.forward(xb);
    const Buffer& batch_loss = model.backward(lb, tb);
    loss += detail::to_scalar(batch_loss) * double(rows);
    if (classify) {
      const std::vector<double> logits = to_host(y.buffer);
      for (std::size_t i = 0; i < rows; ++i) {
        const double* row = logits.data() + i * out;
        const std::size_t best = std::size_t(std::max_element(row, row + out) - row);
        correct += best == std::size_t(labels[start + i]);
      }
    }
  }
  Evaluation e;
  e.loss = loss / double(d.rows);
  e.accuracy = classify ? double(correct) / double(d.rows) : std::numeric_limits<double>::quiet_NaN();
  return e;
}

namespace {

// The data set in host RAM in the compute type, row by row, for staging.
struct HostRows {
  std::vector<unsigned char> x, t;
  std::vector<std::int32_t> labels;
  std::size_t x_row = 0, t_row = 0;  // bytes per row
};

HostRows host_rows(const Mlp& model, const data::Dataset& d) {
  HostRows h;
  const std::vector<double> t = target_rows(model, d, h.labels);
  const DType dt = model.options().dtype;
  auto encode = [dt](const std::vector<double>& v, std::vector<unsigned char>& out) {
    out.resize(v.size() * size_of(dt));
    if (dt == DType::f64) {
      std::memcpy(out.data(), v.data(), out.size());
    } else {
      for (std::size_t i = 0; i < v.size(); ++i) {
        const float f = static_cast<float>(v[i]);
        std::memcpy(out.data() + 4 * i, &f, 4);
      }
    }
  };
  encode(d.features, h.x);
  encode(t, h.t);
  h.x_row = d.cols * size_of(dt);
  h.t_row = model.outputs() * size_of(dt);
  return h;
}

// Two staging slots: pinned host memory and device buffers for one batch each. stage() gathers a
// batch's rows from RAM into a pinned slot and copies it up on the copy queue; use() makes the
// compute queue wait for that copy; done() marks the slot free once compute has used it.
class BatchStream {
 public:
  BatchStream(Backend& be, const HostRows& rows, DType dt, std::size_t batch, std::size_t cols, std::size_t out)
      : be_(be), rows_(rows), copy_q_(be.transfer_queue()) {
    for (int s = 0; s < 2; ++s) {
      hx_.emplace_back(be, dt, batch * cols);
      ht_.emplace_back(be, dt, batch * out);
      hl_.emplace_back(be, DType::i32, batch);
      dx_.emplace_back(be, dt, batch * cols);
      dt_.emplace_back(be, dt, batch * out);
      dl_.emplace_back(be, DType::i32, batch);
    }
    copied_.resize(2);
    consumed_.resize(2);
    // The slots may be blocks the default queue was still using when they went back to the
    // allocator's cache: the copy queue starts after what is queued there now.
    be_.wait_event(copy_q_, be_.record_event(Queue{}));
  }
  BatchStream(const BatchStream&) = delete;
  BatchStream& operator=(const BatchStream&) = delete;
  // Neither queue may still use a slot when it goes back to the cache (also when training ends
  // by an exception).
  ~BatchStream() {
    for (Queue q : {copy_q_, Queue{}}) {
      try {
        be_.synchronize(q);
      } catch (const Error&) {
        // the queue's error surfaces again at its next use
      }
    }
  }
  bool pinned() const { return hx_[0].is_pinned(); }

  void stage(int s, const std::size_t* order, std::size_t count) {
    const auto t0 = std::chrono::steady_clock::now();
    if (copied_[s].impl()) be_.synchronize_event(copied_[s]);  // the last copy out of this pinned slot is done
    auto* hx = static_cast<unsigned char*>(hx_[s].data());
    auto* ht = static_cast<unsigned char*>(ht_[s].data());
    auto* hl = static_cast<std::int32_t*>(hl_[s].data());
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t r = order[i];
      std::memcpy(hx + i * rows_.x_row, rows_.x.data() + r * rows_.x_row, rows_.x_row);
      std::memcpy(ht + i * rows_.t_row, rows_.t.data() + r * rows_.t_row, rows_.t_row);
      hl[i] = rows_.labels[r];
    }
    if (consumed_[s].impl()) be_.wait_event(copy_q_, consumed_[s]);  // compute is done with the device slot
    be_.copy_to_device_async(copy_q_, dx_[s].data(), hx, count * rows_.x_row);
    be_.copy_to_device_async(copy_q_, dt_[s].data(), ht, count * rows_.t_row);
    be_.copy_to_device_async(copy_q_, dl_[s].data(), hl, count * sizeof(std::int32_t));
    copied_[s] = be_.record_event(copy_q_);
    wait_seconds += since(t0);
  }
  void use(int s) { be_.wait_event(Queue{}, copied_[s]); }
  void done(int s) { consumed_[s] = be_.record_event(Queue{}); }
  const Buffer& x(int s) const { return dx_[static_cast<std::size_t>(s)]; }
  const Buffer& t(int s) const { return dt_[static_cast<std::size_t>(s)]; }
  const Buffer& labels(int s) const { return dl_[static_cast<std::size_t>(s)]; }

  double wait_seconds = 0;

 private:
  Backend& be_;
  const HostRows& rows_;
  Queue copy_q_;
  std::vector<HostBuffer> hx_, ht_, hl_;
  std::vector<Buffer> dx_, dt_, dl_;
  std::vector<Event> copied_, consumed_;
};

// What train() refuses before it allocates anything.
void check_train_arguments(const Mlp& model, const data::Dataset& train_set, const data::Dataset* test,
                           const TrainOptions& options) {
  if (options.graphs && options.gradients_ready) {
    throw InvalidArgument(
        "train: graphs cannot be combined with gradients_ready (the overlapped allreduce): its callbacks would run "
        "once, when the pass is recorded, not at every batch");
  }
  if (options.epochs == 0) throw InvalidArgument("train: epochs must be at least 1");
  train_set.check("train");
  if (test != nullptr) test->check("train (the test set)");
  if (options.batch_size == 0) throw InvalidArgument("train: the batch size must be at least 1");
  if (train_set.rows == 0) throw InvalidArgument("train: the training set is empty");
  if (options.replicas == 0 || options.replica >= options.replicas) {
    throw InvalidArgument("train: replica " + std::to_string(options.replica) + " of " +
                          std::to_string(options.replicas) + " does not exist");
  }
  if (options.replicas > 1 && (!options.combine_gradients || !options.sum_over_replicas)) {
    throw InvalidArgument(
        "train: data-parallel replicas need combine_gradients and sum_over_replicas (use "
        "tandem::dist::train)");
  }
  if (train_set.cols != model.inputs()) {
    throw ShapeMismatch("train: the model takes " + std::to_string(model.inputs()) + " features, " + train_set.source +
                        " has " + std::to_string(train_set.cols));
  }
}

// One batch's forward and backward pass and the optimiser's step; the batch's loss goes to `loss`
// (one element on the device). `rows` of the batch's `global_rows` are this replica's.
void learn_batch(Mlp& model, const Matrix& x, const Matrix& l, const Matrix& t, std::size_t rows,
                 std::size_t global_rows, const TrainOptions& options, Buffer loss) {
  if (rows > 0 && options.graphs) {
    loss.copy_from(model.forward_backward_graph(x, l.buffer, t));
  } else if (rows > 0) {
    model.forward(x);
    std::function<void(std::size_t, std::size_t)> ready;
    if (options.gradients_ready) {
      ready = [&, rows, global_rows](std::size_t first, std::size_t count) {
        options.gradients_ready(model, first, count, rows, global_rows);
      };
    }
    loss.copy_from(model.backward(l.buffer, t, ready));
  } else {
    // A replica with no rows of a small last batch adds nothing to its gradient.
    model.zero_gradients();
    loss.fill(0);
  }
  if (options.combine_gradients) options.combine_gradients(model, rows, global_rows);
  model.step();
}

// The epoch's training loss: the batches' losses weighted by their share of the rows, summed over
// the replicas; a loss that is no longer finite stops training.
double epoch_loss(const Mlp& model, const Buffer& losses, const std::vector<double>& weights, std::size_t epoch,
                  const TrainOptions& options) {
  const std::vector<double> batch_losses = to_host(losses);
  double loss = 0;
  for (std::size_t k = 0; k < weights.size(); ++k) loss += batch_losses[k] * weights[k];
  if (options.sum_over_replicas) loss = options.sum_over_replicas(loss);
  if (!std::isfinite(loss)) {
    throw InvalidArgument("train: the loss became " + std::to_string(loss) + " in epoch " + std::to_string(epoch) +
                          "; lower the learning rate (it is " +
                          std::to_string(model.options().optimizer.learning_rate) + ")");
  }
  return loss;
}

}  // namespace

std::vector<EpochReport> train(Mlp& model, const data::Dataset& train_set, const data::Dataset* test,
                               const TrainOptions& options, const std::function<void(const EpochReport&)>& on_epoch) {
  check_train_arguments(model, train_set, test, options);
  Backend& be = model.backend();
  const DType dt = model.options().dtype;
  const std::size_t n = train_set.rows, cols = train_set.cols, out = model.outputs();
  const std::size_t batch = std::min(options.batch_size, n);
  const std::size_t batches = (n + batch - 1) / batch;

  bool stream = options.placement == DataPlacement::stream;
  if (options.placement == DataPlacement::automatic) {
    const double bytes = double(n) * double((cols + out) * size_of(dt) + 4);
    stream = bytes > 0.5 * double(be.device_free_bytes());
  }

  auto t_upload = Clock::now();
  DeviceData dd;
  HostRows hr;
  std::unique_ptr<BatchStream> staging;
  if (stream) {
    hr = host_rows(model, train_set);
    staging = std::make_unique<BatchStream>(be, hr, dt, batch, cols, out);
  } else {
    dd = upload(model, train_set);
    be.synchronize(Queue{});
  }
  double pending_wait = since(t_upload);
  const detail::TrustLabels trusted(model);  // target_rows checked every label against the outputs

  Buffer index(be, DType::i32, stream ? 1 : n), losses(be, dt, batches);
  Buffer xb(be, dt, stream ? 1 : batch * cols), tb(be, dt, stream ? 1 : batch * out), lb(be, DType::i32, batch);
  data::Rng rng(options.seed);
  std::vector<EpochReport> reports;
  for (std::size_t epoch = 1; epoch <= options.epochs; ++epoch) {
    const auto t0 = Clock::now();
    EpochReport rep;
    rep.epoch = epoch;
    rep.streamed = stream;
    rep.pinned_staging = stream && staging->pinned();
    const std::vector<std::size_t> order = rng.permutation(n);
    if (!stream) {
      // Shuffle: the order goes up (n i32), the data stays; batches are gathered on the backend.
      const auto t_wait = Clock::now();
      index.upload(std::vector<std::int32_t>(order.begin(), order.end()));
      pending_wait += since(t_wait);
    } else {
      staging->wait_seconds = 0;
    }
    std::vector<double> weights(batches);
    // This replica's rows of the global batch [start, start + rows): (first, count).
    const std::size_t rep_of = options.replica, reps = options.replicas;
    auto own = [rep_of, reps](std::size_t start, std::size_t rows) {
      const std::size_t lo = rows * rep_of / reps, hi = rows * (rep_of + 1) / reps;
      return std::pair<std::size_t, std::size_t>(start + lo, hi - lo);
    };
    if (stream) {
      const auto [first, count] = own(0, std::min(batch, n));
      staging->stage(0, order.data() + first, count);
    }
    for (std::size_t k = 0; k < batches; ++k) {
      const std::size_t global_start = k * batch, global_rows = std::min(batch, n - global_start);
      const auto [start, rows] = own(global_start, global_rows);
      const auto r = static_cast<std::int64_t>(rows);
      Matrix x, t, l;
      const int slot = static_cast<int>(k % 2);
      if (stream) {
        // The next batch goes up while this one computes.
        if (k + 1 < batches) {
          const std::size_t next = global_start + batch;
          const auto [next_first, next_count] = own(next, std::min(batch, n - next));
          staging->stage(1 - slot, order.data() + next_first, next_count);
        }
        staging->use(slot);
        if (rows > 0) {
          x = matrix(staging->x(slot).slice(0, rows * cols), r, static_cast<std::int64_t>(cols));
          t = matrix(staging->t(slot).slice(0, rows * out), r, static_cast<std::int64_t>(out));
          l = matrix(staging->labels(slot).slice(0, rows), r, 1);
        }
      } else if (rows > 0) {
        const Buffer idx = index.slice(start, rows);
        x = matrix(xb.slice(0, rows * cols), r, static_cast<std::int64_t>(cols));
        t = matrix(tb.slice(0, rows * out), r, static_cast<std::int64_t>(out));
        l = matrix(lb.slice(0, rows), r, 1);
        gather_rows(dd.x, idx, x);
        gather_rows(dd.t, idx, t);
        gather_rows(dd.labels, idx, l);
      }
      learn_batch(model, x, l, t, rows, global_rows, options, losses.slice(k, 1));
      if (stream) staging->done(slot);
      weights[k] = double(rows) / double(n);
      if (options.on_batch) options.on_batch(epoch, k + 1, batches);
    }
    rep.data_wait_seconds = pending_wait + (stream ? staging->wait_seconds : 0);
    pending_wait = 0;
    rep.train_loss = epoch_loss(model, losses, weights, epoch, options);
    rep.seconds = since(t0);
    rep.test_loss = rep.test_accuracy = std::numeric_limits<double>::quiet_NaN();
    if (test != nullptr && test->rows > 0) {
      const Evaluation e = evaluate(model, *test);
      rep.test_loss = e.loss;
      rep.test_accuracy = e.accuracy;
    }
    reports.push_back(rep);
    if (on_epoch) on_epoch(rep);
  }
  return reports;
}

std::vector<std::int32_t> predict_classes(Mlp& model, const data::Dataset& d, std::size_t batch_size) {
  d.check("predict_classes");
  if (batch_size == 0) throw InvalidArgument("predict_classes: the batch size must be at least 1");
  if (d.cols != model.inputs()) {
    throw ShapeMismatch("predict_classes: the model takes " + std::to_string(model.inputs()) + " features, " +
                        d.source + " has " + std::to_string(d.cols));
  }
  check_fits(d.features, d.cols, model.options().dtype, "feature", d);
  Backend& be = model.backend();
  const DType dt = model.options().dtype;
  const std::size_t out = model.outputs();
  std::vector<std::int32_t> classes(d.rows);
  for (std::size_t start = 0; start < d.rows; start += batch_size) {
    const std::size_t rows = std::min(batch_size, d.rows - start);
    const Matrix xb = matrix(to_device(be, std::span(d.features).subspan(start * d.cols, rows * d.cols), dt),
                             static_cast<std::int64_t>(rows), static_cast<std::int64_t>(d.cols));
    const std::vector<double> logits = to_host(model.forward(xb).buffer);
    for (std::size_t i = 0; i < rows; ++i) {
      const double* row = logits.data() + i * out;
      classes[start + i] = static_cast<std::int32_t>(std::max_element(row, row + out) - row);
    }
  }
  return classes;
}

}  // namespace tandem::ml
