// A multi-layer perceptron that trains on any backend: Linear layers and every activation of the op
// table (tandem/op_table.hpp: ReLU, Sigmoid, Tanh, GELU, SiLU, ...) at any depth and width; softmax cross-entropy or
// MSE loss; hand-written backward passes; SGD with momentum or Adam, weight decay; seeded He/Xavier initialisation;
// mini-batch training; save/load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tandem/buffer.hpp"
#include "tandem/data.hpp"
#include "tandem/ops.hpp"

namespace tandem::ml {

// A layer is linear, or an activation of the op table: LayerKind::linear,
// LayerKind::activation(UnaryOp::relu).
class LayerKind {
 public:
  static const LayerKind linear;
  // InvalidArgument when op is not an activation (is_activation).
  static LayerKind activation(UnaryOp op);
  bool is_linear() const { return linear_; }
  // The activation; InvalidArgument on a linear layer.
  UnaryOp op() const;
  bool operator==(const LayerKind&) const = default;

 private:
  constexpr LayerKind(bool is_linear_layer, UnaryOp op) : linear_(is_linear_layer), op_(op) {}
  bool linear_ = true;
  UnaryOp op_ = UnaryOp::relu;
};
inline constexpr LayerKind LayerKind::linear{true, UnaryOp::relu};
enum class LossKind : std::uint32_t { softmax_cross_entropy = 1, mse = 2 };
enum class OptimizerKind { sgd, adam };

std::string_view name_of(LayerKind k);
std::string_view name_of(LossKind k);

// One layer: Linear maps `inputs` features to `outputs`; activations keep the width.
struct LayerSpec {
  LayerKind kind = LayerKind::linear;
  std::size_t inputs = 0;
  std::size_t outputs = 0;
};

// Linear layers of these widths (input, hidden..., output) with `activation` between them and
// none after the last: {64, 128, 10} is Linear(64,128), ReLU, Linear(128,10).
std::vector<LayerSpec> layers_from_widths(const std::vector<std::size_t>& widths, UnaryOp activation = UnaryOp::relu);

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::adam;
  double learning_rate = 1e-3;
  double momentum = 0.9;                              // SGD
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;  // Adam
  // SGD: an L2 term added to the gradient. Adam: decoupled (AdamW), w -= lr * decay * w.
  double weight_decay = 0;
};

struct MlpOptions {
  LossKind loss = LossKind::softmax_cross_entropy;
  OptimizerOptions optimizer = {};
  std::uint64_t seed = 1;    // initialisation (He for ReLU layers, Xavier otherwise)
  DType dtype = DType::f32;  // parameters and activations: f32 or f64
  // Mixed precision: the matmuls take `half_type` (bf16 or f16) inputs and accumulate in f32;
  // the f32 master weights, activations and optimizer stay f32. The loss is scaled dynamically:
  // a step whose gradients hold Inf or NaN is skipped and halves the scale; 1000 good steps in a
  // row double it. Needs dtype f32 and a backend with matmul tiers for half_type.
  bool mixed_precision = false;
  DType half_type = DType::bf16;
  double initial_loss_scale = 65536;
};

struct Evaluation {
  double loss = 0;
  double accuracy = 0;  // classification (softmax cross-entropy) only; NaN for MSE
};

namespace detail {
class TrustLabels;  // the training loop: its labels were checked against the outputs when loaded
}

class Mlp {
 public:
  Mlp(Backend& backend, std::vector<LayerSpec> layers, const MlpOptions& options = {});

  Backend& backend() const { return *backend_; }
  const std::vector<LayerSpec>& layers() const { return layers_; }
  const MlpOptions& options() const { return options_; }
  std::size_t inputs() const { return layers_.front().inputs; }
  std::size_t outputs() const { return layers_.back().outputs; }
  std::size_t parameter_count() const;

  // Forward pass of a batch x (batch, inputs); returns the outputs (batch, outputs): logits for
  // softmax cross-entropy. Keeps the activations for backward().
  const Matrix& forward(const Matrix& x);
  // The loss of the last forward() against the targets, and the gradients of every parameter.
  // labels: i32 class per row (softmax cross-entropy); targets: (batch, outputs) (one-hot for
  // classification, values for MSE). Returns the batch's mean loss on the backend (1 element).
  // gradients_ready(first, count), when given, is called as each Linear layer's gradients are
  // final (queued on the backend), last layer first, with their range in gradients(): their
  // reduction across processes may start while backward goes on with the layers before.
  const Buffer& backward(const Buffer& labels, const Matrix& targets,
                         const std::function<void(std::size_t, std::size_t)>& gradients_ready = {});
  // One optimizer step with the gradients of the last backward(); InvalidArgument when no
  // backward ran since the last step.
  void step();
  // Sets every gradient to zero, as a backward over no rows would (a data-parallel replica with
  // no rows of a small last batch): the next step() takes them.
  void zero_gradients();
  // forward() and backward() of a batch as one Graph (Backend::capture), so that a GPU runs the
  // whole pass from one launch (on cuda a CUDA graph, instead of a launch per op). The first call
  // for a set of buffers (x, labels, targets), batch size and loss scale runs the pass and records
  // it; later calls with the same ones replay the recording, which reads and writes the buffers
  // it was recorded with: the batch must be rewritten in place. Up to 4 recordings are kept (a
  // loop alternating two staging slots, and a smaller last batch). Work queued on the default
  // queue before the call runs before the pass, work after it after the pass. Returns the batch's
  // mean loss, as backward(). Everything the pass does stays on the backend (no callback). With
  // TANDEM_PROFILE on, the pass runs op by op (the profile's timers wait for the host).
  const Buffer& forward_backward_graph(const Matrix& x, const Buffer& labels, const Matrix& targets);
  // How many times forward_backward_graph recorded and replayed (recording includes a run).
  std::uint64_t graphs_recorded() const { return graphs_recorded_; }
  std::uint64_t graphs_replayed() const { return graphs_replayed_; }
  // forward + backward + step on one batch; returns the mean loss (waits for it).
  double train_step(const Matrix& x, const Buffer& labels, const Matrix& targets);

  // Parameters in layer order: for each Linear, W (inputs, outputs) then b (outputs).
  std::vector<Buffer>& parameters() { return params_; }
  const std::vector<Buffer>& parameters() const { return params_; }
  const std::vector<Buffer>& gradients() const { return grads_; }

  // The preprocessing that belongs to the model (saved with it): applied to data by the
  // training loop and the CLI before the first layer.
  data::Standardizer standardizer;

  // Mixed precision: the current loss scale and how many steps were skipped on Inf/NaN.
  double loss_scale() const { return loss_scale_; }
  std::uint64_t skipped_steps() const { return skipped_steps_; }

  // Versioned binary file with a CRC-32; load raises DataError on a corrupt, truncated or
  // wrong-version file, naming the byte offset.
  void save(const std::string& path) const;
  static Mlp load(Backend& backend, const std::string& path);
  std::vector<unsigned char> serialize() const;
  static Mlp deserialize(Backend& backend, const std::vector<unsigned char>& bytes, const std::string& source);

 private:
  void allocate_activations(std::int64_t batch);

  Backend* backend_;
  std::vector<LayerSpec> layers_;
  MlpOptions options_;
  std::vector<Buffer> params_, grads_, moment1_, moment2_;
  // Views for the current batch over stores sized for the largest batch seen: acts_[0] is the
  // input, acts_[i + 1] the output of layer i; deltas_[i] the loss gradient w.r.t. acts_[i].
  std::vector<Matrix> acts_, deltas_;
  std::vector<Buffer> act_store_, delta_store_;
  Buffer probs_store_, row_losses_, loss_;
  // Mixed precision: half copies of each linear layer's input and weights, and of a gradient.
  std::vector<Buffer> half_in_, half_w_;
  Buffer half_delta_, grad_sum_;
  double loss_scale_ = 1;
  std::uint64_t skipped_steps_ = 0, good_steps_ = 0;
  std::int64_t batch_ = 0;
  std::uint64_t steps_ = 0;
  // The queue the passes queue their ops on: the default one, or the graph queue while a pass is
  // recorded or run for forward_backward_graph.
  Queue queue_{};
  // Bumped when the activation stores are reallocated: recordings made before are stale.
  std::uint64_t store_generation_ = 0;
  struct Recording {
    std::vector<const void*> buffers;  // x, labels, targets, the parameters
    std::vector<std::int64_t> shapes;  // and dtypes of x, labels and targets
    double loss_scale = 0;
    std::uint64_t generation = 0;
    const Mlp* owner = nullptr;  // a moved model's recordings refer to the old object
    Graph graph;
  };
  std::vector<Recording> recordings_;
  std::uint64_t graphs_recorded_ = 0, graphs_replayed_ = 0;
  bool gradients_fresh_ = false;  // backward ran since the last step
  // backward() checks the labels it is given (softmax_cross_entropy reads them back) unless the
  // training loop, which checked them once, says otherwise.
  LabelCheck label_check_ = LabelCheck::read_back;
  friend class detail::TrustLabels;
};

// ---- training ----

// Where the training data lives. device: uploaded once, each epoch's shuffled batches gathered
// there by index. stream: kept in host RAM; each batch is gathered into pinned staging memory and
// copied on a second queue while the previous batch computes (double buffering), the data flow
// disk -> RAM -> pinned staging -> device for data sets larger than the device. automatic: device
// when the data takes at most half of the backend's free memory, else stream.
enum class DataPlacement { automatic, device, stream };

struct TrainOptions {
  std::size_t epochs = 30;
  std::size_t batch_size = 32;  // as the CLI and Python default
  std::uint64_t seed = 1;  // shuffling
  DataPlacement placement = DataPlacement::automatic;
  // Each batch's forward and backward through Mlp::forward_backward_graph: recorded once per
  // batch shape and staging slot, replayed after. Not with gradients_ready (its callbacks would
  // run once, when recorded).
  bool graphs = false;
  // Called after each batch is queued: (epoch, batches done, batches in the epoch).
  std::function<void(std::size_t, std::size_t, std::size_t)> on_batch = {};
  // Data-parallel training (set by tandem::dist::train): this process is replica `replica` of
  // `replicas`. Every replica draws the same shuffled order and trains on its share of each
  // global batch (rows [rows * replica / replicas, rows * (replica + 1) / replicas)); before each
  // step, combine_gradients(model, own rows, batch rows) makes the gradients those of the whole
  // batch, and sum_over_replicas adds a value (the epoch's loss) over the replicas.
  std::size_t replica = 0, replicas = 1;
  std::function<void(Mlp&, std::size_t, std::size_t)> combine_gradients = {};
  // Called during backward as each layer's gradients are final: (model, first, count) as in
  // Mlp::backward, then (own rows, batch rows) as combine_gradients gets them. A replica with no
  // rows of a batch runs no backward and gets no call.
  std::function<void(Mlp&, std::size_t, std::size_t, std::size_t, std::size_t)> gradients_ready = {};
  std::function<double(double)> sum_over_replicas = {};
};

struct EpochReport {
  std::size_t epoch = 0;      // 1-based
  double train_loss = 0;      // mean over the epoch's batches
  double test_loss = 0;       // NaN without test data
  double test_accuracy = 0;
  double seconds = 0;
  // Host time spent getting batches to the backend that compute did not hide: the upload (first
  // epoch) and shuffled index (device placement), or staging and waiting for a free staging slot
  // (stream placement).
  double data_wait_seconds = 0;
  bool streamed = false;        // the placement chosen
  bool pinned_staging = false;  // streamed through page-locked memory (GPU runtimes)
};

// Trains on `train` (features already preprocessed; targets: class labels or values), evaluating
// on `test` after each epoch when given. The data set stays on the backend and each epoch's
// batches are gathered there in a fresh shuffled order. on_epoch is called after every epoch.
std::vector<EpochReport> train(Mlp& model, const data::Dataset& train, const data::Dataset* test,
                               const TrainOptions& options,
                               const std::function<void(const EpochReport&)>& on_epoch = {});
// Loss and accuracy of the model on a data set, in batches.
Evaluation evaluate(Mlp& model, const data::Dataset& d, std::size_t batch_size = 1024);
// The class of every sample of d (the largest output), in batches; d's targets are not read. The
// model's standardizer is not applied here: d must be standardised as the training data was.
std::vector<std::int32_t> predict_classes(Mlp& model, const data::Dataset& d, std::size_t batch_size = 1024);

}  // namespace tandem::ml
