// The MLP: layers, losses, hand-written backward passes and optimizers, all composed from the
// primitive ops (no backend-specific code). Batches are row-major (batch, features); activations
// are kept contiguous (ld = width) in buffers sized for the largest batch seen. A linear layer
// followed by an activation adds its bias and applies the activation in one fused pass.
//
// Backward per layer, with dY the gradient w.r.t. the layer's output Y (batch, out):
//   Linear  Y = X W + b:  dW = X^T dY (in, out), db = column sums of dY, dX = dY W^T
//   an activation: dX = f'(X) dY from its input X or its output Y (the op table's grad_from:
//   ReLU dY where Y > 0, Sigmoid dY Y (1 - Y), Tanh dY (1 - Y^2), GELU dY (Phi(X) + X phi(X)), ...)
// Losses, mean over the batch: softmax cross-entropy dZ = (softmax(Z) - onehot) / batch;
// MSE over batch x out values dY = 2 (Y - T) / (batch * out).
#include "tandem/mlp.hpp"

#include <algorithm>
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
    const bool relu_next =
        i + 1 < layers_.size() && !layers_[i + 1].kind.is_linear() &&
        visit_activation(
            layers_[i + 1].kind.op(), []<class Row>(Row) { return Row::he_init; }, [] { return false; });
    const double stddev = relu_next ? std::sqrt(2.0 / double(l.inputs)) : std::sqrt(2.0 / double(l.inputs + l.outputs));
    // The device buffer first, so that a layer too large is OutOfMemory from the backend, then
    // filled from the host in chunks (never the whole layer in host memory as doubles).
    Buffer w(backend, dt, l.inputs * l.outputs);
    constexpr std::size_t kChunk = std::size_t(1) << 20;
    std::vector<double> values;
    std::vector<float> narrow;
    for (std::size_t at = 0; at < w.size(); at += kChunk) {
      values.resize(std::min(kChunk, w.size() - at));
      for (double& v : values) v = rng.normal() * stddev;
      Buffer part = w.slice(at, values.size());
      if (dt == DType::f32) {
        narrow.assign(values.begin(), values.end());
        part.upload(std::span<const float>(narrow));
      } else {
        part.upload(std::span<const double>(values));
      }
    }
    params_.push_back(w);
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
      matmul(view(hin, x.rows, l.inputs), view(half_w_[p / 2], static_cast<std::int64_t>(l.inputs), l.outputs), out, {},
             queue_);
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
    softmax_cross_entropy(y, labels, probs, losses, queue_, label_check_);
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
  gradients_fresh_ = true;
  return loss_;
}

void Mlp::zero_gradients() {
  for (Buffer& g : grads_) fill(g, 0.0, queue_);
  gradients_fresh_ = true;
}

void Mlp::step() {
  // Without a backward since the last step the gradients are stale (or zero): a step would move
  // the weights by them again, silently.
  if (!gradients_fresh_) {
    throw InvalidArgument("Mlp::step: no gradients since the last step; call backward() (or train_step) first");
  }
  gradients_fresh_ = false;
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
  gradients_fresh_ = true;  // a replayed CUDA graph computed them without calling backward()
  return loss_;
}

double Mlp::train_step(const Matrix& x, const Buffer& labels, const Matrix& targets) {
  forward(x);
  backward(labels, targets);
  step();
  return detail::to_scalar(loss_);
}

}  // namespace tandem::ml
