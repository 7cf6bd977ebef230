// The MLP: layers, losses, hand-written backward passes and optimizers, all composed from the
// primitive ops (no backend-specific code). Batches are row-major (batch, features); activations
// are kept contiguous (ld = width) in buffers sized for the largest batch seen. A linear layer
// followed by an activation adds its bias and applies the activation in one fused pass.
//
// Backward per layer, with dY the gradient w.r.t. the layer's output Y (batch, out):
//   Linear  Y = X W + b:  dW = X^T dY (in, out), db = column sums of dY, dX = dY W^T
//   ReLU    dX = dY where Y > 0          Sigmoid  dX = dY * Y (1 - Y)     Tanh  dX = dY (1 - Y^2)
//   GELU    dX = dY (Phi(X) + X phi(X))
// Losses, mean over the batch: softmax cross-entropy dZ = (softmax(Z) - onehot) / batch;
// MSE over batch x out values dY = 2 (Y - T) / (batch * out).
#include "tandem/mlp.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>

#include "host_data.hpp"
#include "tandem/errors.hpp"
#include "tandem/profile.hpp"

namespace tandem::ml {
namespace {

using detail::to_device;
using detail::to_host;

std::string shape(std::size_t a, std::size_t b) { return "(" + std::to_string(a) + ", " + std::to_string(b) + ")"; }

void check_layers(const std::vector<LayerSpec>& layers) {
  if (layers.empty()) throw InvalidArgument("Mlp: a model needs at least one layer");
  bool has_linear = false;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerSpec& l = layers[i];
    const std::string where = "Mlp: layer " + std::to_string(i) + " (" + std::string(name_of(l.kind)) + ")";
    if (!l.kind.is_linear() && !is_activation(l.kind.op())) {
      throw InvalidArgument("Mlp: layer " + std::to_string(i) + " has an unknown kind");
    }
    if (l.inputs == 0 || l.outputs == 0) throw InvalidArgument(where + " has a width of 0");
    if (!l.kind.is_linear() && l.inputs != l.outputs) {
      throw InvalidArgument(where + " maps " + std::to_string(l.inputs) + " to " + std::to_string(l.outputs) +
                            " features; an activation keeps the width");
    }
    if (i > 0 && l.inputs != layers[i - 1].outputs) {
      throw ShapeMismatch(where + " takes " + std::to_string(l.inputs) + " features, but layer " +
                          std::to_string(i - 1) + " gives " + std::to_string(layers[i - 1].outputs));
    }
    has_linear = has_linear || l.kind.is_linear();
  }
  if (!has_linear)
    throw InvalidArgument("Mlp: a model needs at least one linear layer (it has no parameters otherwise)");
}

// A contiguous (rows, cols) view at the start of a buffer.
Matrix view(const Buffer& b, std::int64_t rows, std::size_t cols) {
  return matrix(b.slice(0, static_cast<std::size_t>(rows) * cols), rows, static_cast<std::int64_t>(cols));
}

}  // namespace

LayerKind LayerKind::activation(UnaryOp op) {
  if (!is_activation(op)) {
    throw InvalidArgument("Mlp: " + std::string(name_of(op)) + " is not an activation (" + activation_names() + ")");
  }
  return LayerKind(false, op);
}

UnaryOp LayerKind::op() const {
  if (linear_) throw InvalidArgument("a linear layer is not an activation");
  return op_;
}

std::string_view name_of(LayerKind k) { return k.is_linear() ? "linear" : name_of(k.op()); }

std::string_view name_of(LossKind k) {
  switch (k) {
    case LossKind::softmax_cross_entropy:
      return "softmax_cross_entropy";
    case LossKind::mse:
      return "mse";
  }
  return "?";
}

std::vector<LayerSpec> layers_from_widths(const std::vector<std::size_t>& widths, UnaryOp activation) {
  if (widths.size() < 2) {
    throw InvalidArgument("an MLP needs at least two widths (inputs and outputs), e.g. 64,128,10");
  }
  const LayerKind act = LayerKind::activation(activation);
  std::vector<LayerSpec> layers;
  for (std::size_t i = 0; i + 1 < widths.size(); ++i) {
    if (i > 0) layers.push_back({act, widths[i], widths[i]});
    layers.push_back({LayerKind::linear, widths[i], widths[i + 1]});
  }
  return layers;
}

Mlp::Mlp(Backend& backend, std::vector<LayerSpec> layers, const MlpOptions& options)
    : backend_(&backend), layers_(std::move(layers)), options_(options) {
  check_layers(layers_);
  if (options_.dtype != DType::f32 && options_.dtype != DType::f64) {
    throw DTypeMismatch("Mlp: parameters are f32 or f64, not " + std::string(name_of(options_.dtype)));
  }
  if (options_.loss != LossKind::mse && options_.loss != LossKind::softmax_cross_entropy) {
    throw InvalidArgument("Mlp: unknown loss");
  }
  const OptimizerOptions& o = options_.optimizer;
  if (!(o.learning_rate > 0) || !std::isfinite(o.learning_rate)) {
    throw InvalidArgument("Mlp: the learning rate must be positive, not " + std::to_string(o.learning_rate));
  }
  if (!(o.momentum >= 0 && o.momentum < 1) || !(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1)) {
    throw InvalidArgument("Mlp: momentum, beta1 and beta2 must be in [0, 1)");
  }
  if (!(o.weight_decay >= 0)) throw InvalidArgument("Mlp: weight decay must be >= 0");

  // He initialisation (std sqrt(2 / in)) for a linear layer followed by a ReLU-like activation (the
  // row's he_init: relu, gelu, silu), Xavier/Glorot
  // (std sqrt(2 / (in + out))) otherwise; biases start at zero. One generator, layer by layer.
  data::Rng rng(options_.seed);
  const DType dt = options_.dtype;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const LayerSpec& l = layers_[i];
    if (!l.kind.is_linear()) continue;
    const bool relu_next = i + 1 < layers_.size() && !layers_[i + 1].kind.is_linear() &&
                           visit_activation(
                               layers_[i + 1].kind.op(), []<class Row>(Row) { return Row::he_init; }, [] { return false; });
    const double stddev = relu_next ? std::sqrt(2.0 / double(l.inputs)) : std::sqrt(2.0 / double(l.inputs + l.outputs));
    std::vector<double> w(l.inputs * l.outputs);
    for (double& v : w) v = rng.normal() * stddev;
    params_.push_back(to_device(backend, w, dt));
    Buffer b(backend, dt, l.outputs);
    fill(b, 0);
    params_.push_back(b);
  }
  for (const Buffer& p : params_) {
    grads_.emplace_back(backend, dt, p.size());
    moment1_.emplace_back(backend, dt, p.size());
    moment2_.emplace_back(backend, dt, p.size());
    fill(moment1_.back(), 0);
    fill(moment2_.back(), 0);
  }
  loss_ = Buffer(backend, dt, 1);
  if (options_.mixed_precision) {
    const DType h = options_.half_type;
    if (dt != DType::f32) throw InvalidArgument("Mlp: mixed precision keeps f32 master weights; use dtype f32");
    if (h != DType::bf16 && h != DType::f16) {
      throw DTypeMismatch("Mlp: mixed precision uses bf16 or f16 matmul inputs, not " + std::string(name_of(h)));
    }
    if (backend.matmul_tiers(h).empty()) {
      throw Unsupported("Mlp: backend " + backend.name() + " has no " + std::string(name_of(h)) +
                        " matmul, which mixed precision needs");
    }
    if (!(options_.initial_loss_scale > 0)) throw InvalidArgument("Mlp: the initial loss scale must be positive");
    loss_scale_ = options_.initial_loss_scale;
    for (std::size_t p = 0; p < params_.size(); p += 2) half_w_.emplace_back(backend, h, params_[p].size());
    grad_sum_ = Buffer(backend, DType::f32, params_.size());
  }
}

std::size_t Mlp::parameter_count() const {
  std::size_t n = 0;
  for (const Buffer& p : params_) n += p.size();
  return n;
}

void Mlp::allocate_activations(std::int64_t batch) {
  acts_.resize(layers_.size() + 1);
  deltas_.resize(layers_.size() + 1);
  if (batch > batch_) {
    const DType dt = options_.dtype;
    const auto rows = static_cast<std::size_t>(batch);
    batch_ = 0;  // until every store is allocated (an OutOfMemory below leaves none half-made)
    act_store_.clear();
    delta_store_.clear();
    // The first layer's input gradient is never needed: no store for index 0.
    act_store_.emplace_back();
    delta_store_.emplace_back();
    for (const LayerSpec& l : layers_) {
      act_store_.emplace_back(*backend_, dt, rows * l.outputs);
      delta_store_.emplace_back(*backend_, dt, rows * l.outputs);
    }
    if (options_.mixed_precision) {
      half_in_.clear();
      std::size_t widest = 0;
      for (const LayerSpec& l : layers_) {
        const bool linear = l.kind == LayerKind::linear;
        half_in_.push_back(linear ? Buffer(*backend_, options_.half_type, rows * l.inputs) : Buffer());
        if (linear) widest = std::max(widest, l.outputs);
      }
      half_delta_ = Buffer(*backend_, options_.half_type, rows * widest);
    }
    probs_store_ = Buffer(*backend_, dt, rows * outputs());
    row_losses_ = Buffer(*backend_, dt, rows);
    batch_ = batch;
    ++store_generation_;
  }
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    acts_[i + 1] = view(act_store_[i + 1], batch, layers_[i].outputs);
    deltas_[i + 1] = view(delta_store_[i + 1], batch, layers_[i].outputs);
  }
}

const Matrix& Mlp::forward(const Matrix& x) {
  if (x.cols != static_cast<std::int64_t>(inputs())) {
    throw ShapeMismatch("Mlp::forward: the model takes " + std::to_string(inputs()) + " features, the batch has " +
                        std::to_string(x.cols));
  }
  if (x.ld != x.cols) throw InvalidArgument("Mlp::forward: the batch must be contiguous (ld == cols)");
  if (x.rows == 0) throw InvalidArgument("Mlp::forward: the batch is empty");
  if (x.buffer.dtype() != options_.dtype) {
    throw DTypeMismatch("Mlp::forward: the model computes in " + std::string(name_of(options_.dtype)) +
                        ", the batch is " + std::string(name_of(x.buffer.dtype())));
  }
  allocate_activations(x.rows);
  acts_[0] = x;
  std::size_t p = 0;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const LayerSpec& l = layers_[i];
    Matrix& out = acts_[i + 1];
    const Matrix& in = acts_[i];
    if (!l.kind.is_linear()) {
      unary(l.kind.op(), in.buffer, out.buffer, queue_);
      continue;
    }
      if (options_.mixed_precision) {
        Buffer hin = half_in_[i].slice(0, static_cast<std::size_t>(x.rows) * l.inputs);
        convert(in.buffer, hin, queue_);
        convert(params_[p], half_w_[p / 2], queue_);
        matmul(view(hin, x.rows, l.inputs), view(half_w_[p / 2], static_cast<std::int64_t>(l.inputs), l.outputs), out,
               {}, queue_);
      } else {
        matmul(in, view(params_[p], static_cast<std::int64_t>(l.inputs), l.outputs), out, {}, queue_);
      }
      if (i + 1 < layers_.size() && !layers_[i + 1].kind.is_linear()) {
        // Bias and the activation after it in one pass (the layer's epilogue). Activations whose
        // derivative reads the input (grad_from input: gelu, silu) keep the pre-activation, in
        // place; the others work from the output.
        const UnaryOp act = layers_[i + 1].kind.op();
        const bool keep_z = grad_from(act) == GradFrom::input;
        bias_activation(out, params_[p + 1], act, acts_[i + 2], keep_z ? &out : nullptr, queue_);
        ++i;
      } else {
        add_row_vector(out, params_[p + 1], out, queue_);
      }
      p += 2;
  }
  return acts_.back();
}

const Buffer& Mlp::backward(const Buffer& labels, const Matrix& targets,
                            const std::function<void(std::size_t, std::size_t)>& gradients_ready) {
  if (acts_.empty() || acts_[0].rows == 0) throw InvalidArgument("Mlp::backward: call forward() first");
  const std::int64_t b = acts_[0].rows;
  const auto out_cols = outputs();
  if (targets.rows != b || targets.cols != static_cast<std::int64_t>(out_cols)) {
    throw ShapeMismatch("Mlp::backward: targets must be " + shape(std::size_t(b), out_cols) + ", not " +
                        shape(std::size_t(targets.rows), std::size_t(targets.cols)));
  }
  Matrix& top = deltas_.back();
  const Matrix& y = acts_.back();
  if (options_.loss == LossKind::softmax_cross_entropy) {
    Matrix probs = view(probs_store_, b, out_cols);
    Buffer losses = row_losses_.slice(0, std::size_t(b));
    softmax_cross_entropy(y, labels, probs, losses, queue_);
    reduce(ReduceOp::sum, losses, loss_, queue_);
    scale(1.0 / double(b), loss_, loss_, queue_);
    sub(probs.buffer, targets.buffer, top.buffer, queue_);
    scale(loss_scale_ / double(b), top.buffer, top.buffer, queue_);
  } else {
    mse(y.buffer, targets.buffer, loss_, queue_);
    sub(y.buffer, targets.buffer, top.buffer, queue_);
    scale(2.0 * loss_scale_ / double(b * static_cast<std::int64_t>(out_cols)), top.buffer, top.buffer, queue_);
  }
  std::size_t p = params_.size();
  for (std::size_t i = layers_.size(); i-- > 0;) {
    const LayerSpec& l = layers_[i];
    const Matrix& dy = deltas_[i + 1];
    const bool need_dx = i > 0;
    Matrix dx;
    if (need_dx) dx = deltas_[i];
    if (!l.kind.is_linear()) {
      // dx from the layer's input or output, as the activation's row says.
      const UnaryOp act = l.kind.op();
      const Matrix& v = grad_from(act) == GradFrom::input ? acts_[i] : acts_[i + 1];
      if (need_dx) binary(grad_op(act), v.buffer, dy.buffer, dx.buffer, queue_);
      continue;
    }
      p -= 2;
      const auto in = static_cast<std::int64_t>(l.inputs);
      Matrix dw = view(grads_[p], in, l.outputs);
      if (options_.mixed_precision) {
        Matrix hdy = view(half_delta_, b, l.outputs);
        convert(dy.buffer, hdy.buffer, queue_);
        matmul(view(half_in_[i], b, l.inputs), hdy, dw, {.trans_a = Transpose::yes}, queue_);
        if (need_dx) matmul(hdy, view(half_w_[p / 2], in, l.outputs), dx, {.trans_b = Transpose::yes}, queue_);
      } else {
        matmul(acts_[i], dy, dw, {.trans_a = Transpose::yes}, queue_);
        if (need_dx) matmul(dy, view(params_[p], in, l.outputs), dx, {.trans_b = Transpose::yes}, queue_);
      }
      reduce_cols(ReduceOp::sum, dy, grads_[p + 1], queue_);
      if (gradients_ready) gradients_ready(p, 2);
  }
  return loss_;
}

void Mlp::step() {
  if (options_.mixed_precision) {
    // The gradients carry the loss scale: skip the step when any overflowed, else unscale them.
    for (std::size_t i = 0; i < grads_.size(); ++i) {
      Buffer slot = grad_sum_.slice(i, 1);
      reduce(ReduceOp::sum, grads_[i], slot, queue_);
    }
    bool finite = true;
    for (float v : grad_sum_.to_vector<float>(queue_)) finite = finite && std::isfinite(v);
    if (!finite) {
      ++skipped_steps_;
      good_steps_ = 0;
      loss_scale_ = std::max(loss_scale_ / 2, 1.0);
      return;
    }
    for (Buffer& g : grads_) scale(1 / loss_scale_, g, g, queue_);
    if (++good_steps_ == 1000) {
      good_steps_ = 0;
      loss_scale_ = std::min(loss_scale_ * 2, 16777216.0);
    }
  }
  ++steps_;
  const OptimizerOptions& o = options_.optimizer;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Buffer& w = params_[i];
    Buffer& g = grads_[i];
    if (o.kind == OptimizerKind::adam) {
      AdamParams a;
      a.learning_rate = o.learning_rate;
      a.beta1 = o.beta1;
      a.beta2 = o.beta2;
      a.epsilon = o.epsilon;
      a.weight_decay = o.weight_decay;
      a.t = steps_;
      profile::OpTimer timer(*backend_, queue_, "adam_step");
      if (timer.on()) timer.set(std::string(name_of(w.dtype())) + "[" + std::to_string(w.size()) + "]", 7 * w.bytes());
      backend_->adam_step(queue_, w.dtype(), w.size(), a, w.data(), g.data(), moment1_[i].data(), moment2_[i].data());
    } else {
      // v = momentum v + g + decay w; w -= lr v.
      if (o.weight_decay != 0) axpy(o.weight_decay, w, g, queue_);
      Buffer& v = moment1_[i];
      if (o.momentum != 0) {
        scale(o.momentum, v, v, queue_);
        axpy(1, g, v, queue_);
        axpy(-o.learning_rate, v, w, queue_);
      } else {
        axpy(-o.learning_rate, g, w, queue_);
      }
    }
  }
}

const Buffer& Mlp::forward_backward_graph(const Matrix& x, const Buffer& labels, const Matrix& targets) {
  Backend& be = *backend_;
  // The pass's ops go on the graph queue while it is run or recorded.
  struct OnQueue {
    Queue& q;
    Queue saved;
    OnQueue(Queue& queue, Queue use) : q(queue), saved(queue) { q = use; }
    ~OnQueue() { q = saved; }
  };
  const Queue gq = be.graph_queue();
  // The default queue's work before the pass, then the pass, then the default queue's work after
  // it, also when the pass throws (its ops queued so far are ordered before what follows).
  be.wait_event(gq, be.record_event(Queue{}));
  struct ThenDefault {
    Backend& be;
    Queue gq;
    ~ThenDefault() {
      try {
        be.wait_event(Queue{}, be.record_event(gq));
      } catch (const Error&) {  // the device failed: the error already raised says so
      }
    }
  } then_default{be, gq};

  std::vector<const void*> buffers = {x.buffer.data(), labels.data(), targets.buffer.data()};
  for (const Buffer& w : params_) buffers.push_back(w.data());
  const std::vector<std::int64_t> shapes = {x.rows,
                                            x.cols,
                                            x.ld,
                                            static_cast<std::int64_t>(x.buffer.dtype()),
                                            static_cast<std::int64_t>(labels.size()),
                                            static_cast<std::int64_t>(labels.dtype()),
                                            targets.rows,
                                            targets.cols,
                                            targets.ld,
                                            static_cast<std::int64_t>(targets.buffer.dtype())};
  {
    OnQueue on(queue_, gq);
    if (profile::enabled()) {
      // The profile's timers wait for the host after each op, which no recording allows: op by
      // op, so that each shows in the profile.
      forward(x);
      return backward(labels, targets);
    }
    auto same = [&](const Recording& r) {
      return r.owner == this && r.buffers == buffers && r.shapes == shapes && r.loss_scale == loss_scale_ &&
             r.generation == store_generation_;
    };
    const auto found = std::find_if(recordings_.begin(), recordings_.end(), same);
    if (found != recordings_.end()) {
      allocate_activations(x.rows);  // the views for this batch size, as forward() leaves them
      acts_[0] = x;
      found->graph.replay();
      ++graphs_replayed_;
    } else {
      // The pass, run now: allocates what it needs (the activation stores, the queue's scratch
      // memory, a library's handle), checks its input, and gives this call's result.
      forward(x);
      backward(labels, targets);
      // Then recorded (not run) for the next calls. Recordings of a model moved since, or made
      // before the activation stores were reallocated, refer to memory that is gone.
      std::erase_if(recordings_,
                    [this](const Recording& r) { return r.owner != this || r.generation != store_generation_; });
      if (recordings_.size() == 4) recordings_.erase(recordings_.begin());
      const Matrix xc = x, tc = targets;
      const Buffer lc = labels;
      Graph g = be.capture(gq, [this, xc, lc, tc] {
        forward(xc);
        backward(lc, tc);
      });
      recordings_.push_back({buffers, shapes, loss_scale_, store_generation_, this, std::move(g)});
      ++graphs_recorded_;
    }
  }
  return loss_;
}

double Mlp::train_step(const Matrix& x, const Buffer& labels, const Matrix& targets) {
  forward(x);
  backward(labels, targets);
  step();
  return detail::to_scalar(loss_);
}

// ---- training loop ----

namespace {

// The model's targets for a data set: one-hot rows (classification) or the values (MSE).
std::vector<double> target_rows(const Mlp& model, const data::Dataset& d, std::vector<std::int32_t>& labels) {
  const std::size_t out = model.outputs();
  if (d.targets.size() != d.rows) throw InvalidArgument("train: the data set " + d.source + " has no targets");
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

Evaluation evaluate(Mlp& model, const data::Dataset& d, std::size_t batch_size) {
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

}  // namespace

std::vector<EpochReport> train(Mlp& model, const data::Dataset& train_set, const data::Dataset* test,
                               const TrainOptions& options, const std::function<void(const EpochReport&)>& on_epoch) {
  if (options.graphs && options.gradients_ready) {
    throw InvalidArgument(
        "train: graphs cannot be combined with gradients_ready (the overlapped allreduce): its callbacks would run "
        "once, when the pass is recorded, not at every batch");
  }
  if (options.epochs == 0) throw InvalidArgument("train: epochs must be at least 1");
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
      Buffer slot_loss = losses.slice(k, 1);
      if (rows > 0 && options.graphs) {
        slot_loss.copy_from(model.forward_backward_graph(x, l.buffer, t));
      } else if (rows > 0) {
        model.forward(x);
        std::function<void(std::size_t, std::size_t)> ready;
        if (options.gradients_ready) {
          ready = [&, rows, global_rows](std::size_t first, std::size_t count) {
            options.gradients_ready(model, first, count, rows, global_rows);
          };
        }
        slot_loss.copy_from(model.backward(l.buffer, t, ready));
      } else {
        // A replica with no rows of a small last batch adds nothing to its gradient.
        for (Buffer g : model.gradients()) g.fill(0);
        slot_loss.fill(0);
      }
      if (options.combine_gradients) options.combine_gradients(model, rows, global_rows);
      model.step();
      if (stream) staging->done(slot);
      weights[k] = double(rows) / double(n);
      if (options.on_batch) options.on_batch(epoch, k + 1, batches);
    }
    const std::vector<double> batch_losses = to_host(losses);
    rep.data_wait_seconds = pending_wait + (stream ? staging->wait_seconds : 0);
    pending_wait = 0;
    rep.train_loss = 0;
    for (std::size_t k = 0; k < batches; ++k) rep.train_loss += batch_losses[k] * weights[k];
    if (options.sum_over_replicas) rep.train_loss = options.sum_over_replicas(rep.train_loss);
    if (!std::isfinite(rep.train_loss)) {
      throw InvalidArgument("train: the loss became " + std::to_string(rep.train_loss) + " in epoch " +
                            std::to_string(epoch) + "; lower the learning rate (it is " +
                            std::to_string(model.options().optimizer.learning_rate) + ")");
    }
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

}  // namespace tandem::ml
