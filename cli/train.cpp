// tandem train: load a data set, split it, standardise it, train an MLP on a backend and report
// the loss and held-out accuracy per epoch.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#ifdef TANDEM_HAVE_MPI
#include <mpi.h>
#endif

#include "cli.hpp"
#include "options.hpp"
#include "tandem/mlp.hpp"
#include "tandem/tandem.hpp"

namespace tandem::cli {
namespace {

bool distributed_job = false;  // train --distributed runs on more than one rank

struct TrainArgs {
  DataArgs source;
  std::string backend, save, layers_text, activation = "relu", optimizer = "adam", dtype = "f32", placement = "auto";
  ml::MlpOptions model;
  ml::TrainOptions train;
  double test_fraction = 0.2, min_accuracy = 0;
  std::uint64_t seed = 0;
  CLI::Option* seed_option = nullptr;
  bool no_standardize = false, mixed_precision = false, distributed = false;
  dist::DataParallelOptions parallel;
  JsonOption json;
};

std::string widths_text(const std::vector<std::size_t>& w) {
  std::string s;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (i) s += '-';
    s += std::to_string(w[i]);
  }
  return s;
}

// A progress bar on stderr, only when stderr is a terminal.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled && isatty(2)) {}
  void show(std::size_t epoch, std::size_t epochs, std::size_t done, std::size_t total) {
    if (!enabled_) return;
    const int width = 30, filled = total ? static_cast<int>(width * done / total) : width;
    std::fprintf(stderr, "\r  epoch %zu/%zu [%.*s%*s] %3d%%", epoch, epochs, filled,
                 "==============================", width - filled, "",
                 total ? static_cast<int>(100 * done / total) : 100);
    std::fflush(stderr);
  }
  void clear() {
    if (enabled_) std::fprintf(stderr, "\r%60s\r", "");
  }

 private:
  bool enabled_;
};

// The data set loaded, checked as a classifier's, split and standardised (fitted on the training
// split only).
struct TrainData {
  data::Dataset all;
  data::Split split;
  data::Standardizer standardizer;
  std::int32_t classes = 0;
};

TrainData load_train_data(const TrainArgs& a, std::uint64_t split_seed) {
  TrainData d;
  d.all = a.source.load();
  const data::Dataset& all = d.all;
  if (all.targets.empty()) throw InvalidArgument("the data has no label column; give --label-column");
  const std::int32_t classes = d.classes = all.class_count();
  if (classes < 2) throw DataError(all.source + " has a single class; training a classifier needs two or more");
  if (classes > 65536 || static_cast<std::size_t>(classes) > all.rows) {
    // Few classes and fewer rows: too little data, not an ID column (once said of a one-row file).
    throw DataError(all.source + ": the label column holds class indices up to " + std::to_string(classes - 1) +
                    " for " + std::to_string(all.rows) + " samples, " +
                    (classes <= 100
                         ? std::string("too few samples to train a classifier with that many classes")
                         : std::string("which looks like an ID or a value rather than a class; check --label-column")));
  }
  if (a.test_fraction > 0) {
    d.split = data::train_test_split(all, a.test_fraction, split_seed);
  } else {
    d.split.train = all;
  }
  if (!a.no_standardize) {
    d.standardizer = data::Standardizer::fit(d.split.train);
    d.standardizer.apply(d.split.train);
    if (d.split.test.rows) d.standardizer.apply(d.split.test);
  }
  return d;
}

// --distributed: every rank's samples/s over its own share and seconds in allreduce and broadcast,
// gathered by an allreduce that every rank joins; printed (with `text`) and returned on rank 0.
Json rank_summary(dist::Communicator& comm, const TrainArgs& a, std::size_t train_rows, std::size_t epochs,
                  double train_seconds, bool text) {
  std::vector<double> per_rank(2 * static_cast<std::size_t>(comm.size()), 0.0);
  const double own = double(train_rows) / double(comm.size()) * double(epochs);
  per_rank[2 * static_cast<std::size_t>(comm.rank())] = own / train_seconds;
  per_rank[2 * static_cast<std::size_t>(comm.rank()) + 1] = comm.seconds();
  comm.allreduce(per_rank, dist::Combine::sum);
  if (comm.rank() != 0) return nullptr;
  const double all_ranks = double(train_rows) * double(epochs) / train_seconds;
  Json ranks = Json::array();
  for (int r = 0; r < comm.size(); ++r) {
    const double rate = per_rank[2 * std::size_t(r)], reduce = per_rank[2 * std::size_t(r) + 1];
    if (text) {
      std::printf("rank %d: %.0f samples/s, %.3f s in allreduce%s\n", r, rate, reduce,
                  a.parallel.overlap ? " (not hidden by backward)" : "");
    }
    ranks.push_back({{"rank", r}, {"samples_per_second", rate}, {"allreduce_seconds", reduce}});
  }
  if (text) std::printf("all ranks: %.0f samples/s\n", all_ranks);
  return Json{{"ranks", comm.size()}, {"overlap", a.parallel.overlap}, {"samples_per_second", all_ranks}, {"per_rank", ranks}};
}

// What train is about to do: the data, the model and the optimiser.
void print_plan(const TrainArgs& a, const TrainData& d, const std::vector<std::size_t>& layers, const ml::Mlp& model,
                const dist::Communicator* comm) {
  if (comm != nullptr) {
    std::printf("data-parallel on %d ranks%s: each trains on its share of every batch of %zu\n", comm->size(),
                dist::built_with_mpi() ? "" : " (this tandem was built without MPI: one process)",
                a.train.batch_size);
  }
  std::printf("tandem train: %s: %zu train / %zu held-out samples, %zu features, %d classes\n", a.source.data.c_str(),
              d.split.train.rows, d.split.test.rows, d.all.cols, d.classes);
  std::printf("model %s (%s), %zu parameters, %s%s; backend %s\n", widths_text(layers).c_str(), a.activation.c_str(),
              model.parameter_count(), a.dtype.c_str(), a.mixed_precision ? " with bf16 matmuls" : "",
              model.backend().name().c_str());
  std::printf("%s lr %g, batch %zu, %zu epochs, seed %llu\n", a.optimizer.c_str(), a.model.optimizer.learning_rate,
              a.train.batch_size, a.train.epochs, static_cast<unsigned long long>(a.train.seed));
}

// One epoch's line: the loss, the held-out loss and accuracy where there is held-out data, the
// time and, on the first, where the data was kept.
void print_epoch(const ml::EpochReport& r, std::size_t epochs, bool held_out) {
  std::printf("epoch %3zu/%zu  loss %.4f", r.epoch, epochs, r.train_loss);
  if (held_out) std::printf("  held-out loss %.4f  accuracy %5.1f%%", r.test_loss, 100 * r.test_accuracy);
  std::printf("  %.3f s (data %.3f s%s)\n", r.seconds, r.data_wait_seconds,
              r.epoch != 1       ? ""
              : !r.streamed      ? ", kept on the device"
              : r.pinned_staging ? ", streamed through pinned staging"
                                 : ", streamed through host staging");
  std::fflush(stdout);
}

int run_train(TrainArgs& a) {
  if (!a.save.empty()) check_writable(a.save, {a.source.data, a.source.labels});  // before training, not after it
  std::uint64_t split_seed = 42;
  if (a.seed_option->count() > 0) a.model.seed = a.train.seed = split_seed = a.seed;
  a.model.optimizer.kind = a.optimizer == "adam" ? ml::OptimizerKind::adam : ml::OptimizerKind::sgd;
  a.model.dtype = a.dtype == "f32" ? DType::f32 : DType::f64;
  a.model.mixed_precision = a.mixed_precision;
  a.train.placement = a.placement == "device"   ? ml::DataPlacement::device
                      : a.placement == "stream" ? ml::DataPlacement::stream
                                                : ml::DataPlacement::automatic;
  const UnaryOp activation = parse_activation(a.activation);
  std::vector<std::size_t> layers = a.layers_text.empty() ? std::vector<std::size_t>{} : parse_widths(a.layers_text);
  if (a.parallel.overlap && !a.distributed) throw InvalidArgument("--overlap goes with --distributed");
  if (a.parallel.overlap && a.train.graphs) {
    throw InvalidArgument("--graphs cannot go with --overlap: the overlapped sums start from inside backward");
  }
  if (a.min_accuracy > 0 && a.test_fraction == 0) {
    throw InvalidArgument("--min-accuracy needs held-out data: give --test-fraction above 0");
  }

  const TrainData d = load_train_data(a, split_seed);
  const data::Dataset& all = d.all;
  const data::Split& split = d.split;
  const std::int32_t classes = d.classes;
  if (layers.empty()) layers = {all.cols, 128, static_cast<std::size_t>(classes)};
  if (layers.front() != all.cols) {
    throw InvalidArgument("the data has " + std::to_string(all.cols) + " features, so --layers must start with " +
                          std::to_string(all.cols) + " (it starts with " + std::to_string(layers.front()) + ")");
  }
  if (layers.back() < static_cast<std::size_t>(classes)) {
    throw InvalidArgument("the data has " + std::to_string(classes) +
                          " classes, so the last of --layers must be at least " + std::to_string(classes));
  }
  Backend& be = a.backend.empty() ? default_backend() : get_backend(a.backend);
  ml::Mlp model(be, ml::layers_from_widths(layers, activation), a.model);
  model.standardizer = d.standardizer;
  // --distributed: one replica per MPI rank (mpirun -np N tandem train --distributed ...); rank 0
  // prints and saves, every rank reports its throughput and time in allreduce at the end.
  dist::Communicator* comm = nullptr;
  if (a.distributed) {
    comm = &dist::Communicator::world();
    distributed_job = comm->size() > 1;
  }
  const bool root = comm == nullptr || comm->rank() == 0;
  const bool text = root && !a.json.to_stdout();

  if (text) print_plan(a, d, layers, model, comm);
  Progress progress(root);
  a.train.on_batch = [&](std::size_t epoch, std::size_t done, std::size_t total) {
    progress.show(epoch, a.train.epochs, done, total);
  };
  const auto start = std::chrono::steady_clock::now();
  const data::Dataset* test = split.test.rows ? &split.test : nullptr;
  Json epochs = Json::array();
  const auto on_epoch = [&](const ml::EpochReport& r) {
    progress.clear();
    epochs.push_back({{"epoch", r.epoch},
                      {"loss", number(r.train_loss)},
                      {"test_loss", number(r.test_loss)},
                      {"test_accuracy", number(r.test_accuracy)},
                      {"seconds", r.seconds},
                      {"data_wait_seconds", r.data_wait_seconds}});
    if (text) print_epoch(r, a.train.epochs, split.test.rows > 0);
  };
  const auto reports = comm != nullptr ? dist::train(*comm, model, split.train, test, a.train, on_epoch, a.parallel)
                                       : ml::train(model, split.train, test, a.train, on_epoch);
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double train_seconds = 0;
  for (const auto& r : reports) train_seconds += r.seconds;
  const double per_epoch = train_seconds / double(reports.size());
  if (!a.save.empty() && root) model.save(a.save);
  Json distributed = nullptr;
  if (comm != nullptr) {
    distributed = rank_summary(*comm, a, split.train.rows, reports.size(), train_seconds, text);
    if (!root) return 0;
  }

  const ml::EpochReport& last = reports.back();
  const bool below = a.min_accuracy > 0 && !(last.test_accuracy >= a.min_accuracy);
  if (text) {
    if (split.test.rows) {
      std::printf("held-out accuracy %.2f%% on %zu samples; ", 100 * last.test_accuracy, split.test.rows);
    }
    std::printf("%.4f s per epoch, %.2f s in all\n", per_epoch, total);
    if (!a.save.empty()) std::printf("model saved to %s\n", a.save.c_str());
  }
  if (below) {
    std::fprintf(stderr, "tandem train: held-out accuracy %.2f%% is below --min-accuracy %.2f%%\n",
                 100 * last.test_accuracy, 100 * a.min_accuracy);
  }
  a.json.write(Json{{"command", "train"},
                    {"data", a.source.data},
                    {"backend", be.name()},
                    {"layers", layers},
                    {"activation", a.activation},
                    {"optimizer", a.optimizer},
                    {"learning_rate", a.model.optimizer.learning_rate},
                    {"batch", a.train.batch_size},
                    {"dtype", a.dtype},
                    {"mixed_precision", a.mixed_precision},
                    {"graphs", a.train.graphs},
                    {"train_samples", split.train.rows},
                    {"test_samples", split.test.rows},
                    {"epochs", epochs},
                    {"test_accuracy", number(last.test_accuracy)},
                    {"min_accuracy", a.min_accuracy > 0 ? Json(a.min_accuracy) : Json(nullptr)},
                    {"seconds_per_epoch", per_epoch},
                    {"seconds", total},
                    {"saved", a.save.empty() ? Json(nullptr) : Json(a.save)},
                    {"distributed", distributed}});
  return below ? 1 : 0;
}

}  // namespace

Command add_train(CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  a->model.optimizer.learning_rate = 1e-3;
  // epochs and batch size: TrainOptions' defaults, as C++ and Python have them
  CLI::App* sub = app.add_subcommand(
      "train",
      "train an MLP classifier on a data set and report loss and held-out accuracy per epoch (e.g. tandem train "
      "--data data/digits.csv.gz)");
  a->source.add(sub, "the class column: last, first, or a 0-based index (negative: from the end)");
  sub->add_option("--layers", a->layers_text, "widths from inputs to classes (default: features,128,classes)")
      ->type_name("W,W,...")
      ->check(width_list());
  std::vector<std::string> activations;
  for (UnaryOp op : kActivations) activations.emplace_back(name_of(op));
  sub->add_option("--activation", a->activation, "the hidden layers' activation")
      ->check(CLI::IsMember(activations))
      ->capture_default_str();
  sub->add_option("--epochs", a->train.epochs, "passes over the training data")
      ->check(whole_number(1))
      ->capture_default_str();
  sub->add_option("--batch", a->train.batch_size, "samples per step")->check(whole_number(1))->capture_default_str();
  sub->add_option("--lr", a->model.optimizer.learning_rate, "learning rate")
      ->check(real_number(1e-12, 1e3))
      ->capture_default_str();
  sub->add_option("--optimizer", a->optimizer, "adam (AdamW decay) or sgd")
      ->check(CLI::IsMember({"adam", "sgd"}))
      ->capture_default_str();
  sub->add_option("--momentum", a->model.optimizer.momentum, "sgd momentum")->check(real_number(0, 0.999999));
  sub->add_option("--weight-decay", a->model.optimizer.weight_decay, "weight decay")->check(real_number(0, 1e3));
  sub->add_option("--test-fraction", a->test_fraction, "held-out share (0: none)")
      ->check(real_number(0, 0.99))
      ->capture_default_str();
  a->seed_option = sub->add_option("--seed", a->seed, "split and initialisation seed (default 42 split, 1 init)")
                       ->check(whole_number(0, UINT64_MAX));
  sub->add_flag("--no-standardize", a->no_standardize,
                "keep the raw features (default: standardise on the training split)");
  sub->add_option("--dtype", a->dtype, "parameter type")->check(CLI::IsMember({"f32", "f64"}))->capture_default_str();
  sub->add_flag("--mixed-precision", a->mixed_precision, "bf16 matmul inputs, f32 weights, loss scaling");
  sub->add_flag("--distributed", a->distributed,
                "data-parallel over MPI: mpirun -np N tandem train --distributed ... (rank 0 prints)");
  sub->add_flag("--overlap", a->parallel.overlap,
                "with --distributed: sum each layer's gradients while backward goes on");
  sub->add_option("--data-placement", a->placement,
                  "auto, device (upload once, gather batches there) or stream (pinned staging, next batch copied "
                  "while this one computes)")
      ->check(CLI::IsMember({"auto", "device", "stream"}))
      ->capture_default_str();
  sub->add_flag("--graphs", a->train.graphs,
                "each batch's forward and backward recorded once as a graph and replayed (on cuda one CUDA graph "
                "launch per batch); not with --overlap");
  sub->add_option("--backend", a->backend, "backend to train on (default: TANDEM_BACKEND, else auto)")
      ->type_name("NAME");
  sub->add_option("--save", a->save, "write the trained model (versioned, checksummed) for tandem predict")
      ->type_name("FILE");
  sub->add_option("--min-accuracy", a->min_accuracy, "exit 1 when the final held-out accuracy is below X (0 to 1)")
      ->check(real_number(0, 1));
  a->json.add(sub, "the run, epoch by epoch,");
  return {sub, [a] { return run_train(*a); }};
}

void end_distributed_job(int code) {
#ifdef TANDEM_HAVE_MPI
  // The other ranks may be waiting in a collective for this one: end them all (a program's
  // choice; the library itself never aborts).
  if (distributed_job) MPI_Abort(MPI_COMM_WORLD, code);
#else
  (void)code;
#endif
}

}  // namespace tandem::cli
