// tandem train: load a data set, split it, standardise it, train an MLP on a backend and report
// the loss and held-out accuracy per epoch.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#ifdef TANDEM_HAVE_MPI
#include <mpi.h>
#endif

#include "args.hpp"
#include "cli.hpp"
#include "tandem/mlp.hpp"
#include "tandem/tandem.hpp"

namespace tandem::cli {
namespace {

bool distributed_job = false;  // train --distributed runs on more than one rank

struct TrainArgs {
  std::string data, labels, label_column = "last", backend, save, header = "detect";
  char delimiter = '\0';
  std::vector<std::size_t> layers;
  UnaryOp activation = UnaryOp::relu;
  ml::MlpOptions model;
  ml::TrainOptions train;
  double test_fraction = 0.2;
  std::uint64_t split_seed = 42;
  bool standardize = true, json = false, mixed_precision = false, distributed = false;
  dist::DataParallelOptions parallel;
};

data::CsvOptions csv_options(const std::string& label_column, char delimiter, const std::string& header) {
  data::CsvOptions o;
  o.label_column = data::parse_label_column(label_column);
  o.delimiter = delimiter;
  if (header == "yes") {
    o.header = data::CsvOptions::Header::yes;
  } else if (header == "no") {
    o.header = data::CsvOptions::Header::no;
  } else if (header != "detect") {
    throw InvalidArgument("--header '" + header + "': use yes, no or detect");
  }
  return o;
}

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

}  // namespace

int train_main(const std::vector<std::string>& argv) {
  TrainArgs a;
  a.model.optimizer.learning_rate = 1e-3;
  a.train.epochs = 30;
  a.train.batch_size = 32;
  Args args(argv);
  while (args.next()) {
    const std::string& f = args.flag();
    if (f == "--data")
      a.data = args.value();
    else if (f == "--labels")
      a.labels = args.value();
    else if (f == "--label-column")
      a.label_column = args.value();
    else if (f == "--delimiter") {
      const std::string d = args.value();
      if (d.size() != 1 && d != "tab") throw InvalidArgument("--delimiter takes one character (or 'tab')");
      a.delimiter = d == "tab" ? '\t' : d[0];
    } else if (f == "--header")
      a.header = args.value();
    else if (f == "--layers")
      a.layers = args.counts();
    else if (f == "--activation")
      a.activation = parse_activation(args.value());  // the op table's activations
    else if (f == "--epochs")
      a.train.epochs = args.count();
    else if (f == "--batch")
      a.train.batch_size = args.count();
    else if (f == "--lr")
      a.model.optimizer.learning_rate = args.real(1e-12, 1e3);
    else if (f == "--optimizer") {
      const std::string o = args.value();
      if (o != "adam" && o != "sgd") throw InvalidArgument("--optimizer '" + o + "': use adam or sgd");
      a.model.optimizer.kind = o == "adam" ? ml::OptimizerKind::adam : ml::OptimizerKind::sgd;
    } else if (f == "--momentum")
      a.model.optimizer.momentum = args.real(0, 0.999999);
    else if (f == "--weight-decay")
      a.model.optimizer.weight_decay = args.real(0, 1e3);
    else if (f == "--test-fraction")
      a.test_fraction = args.real(0, 0.99);
    else if (f == "--seed") {
      const std::size_t s = args.count(0);
      a.model.seed = a.train.seed = a.split_seed = s;
    } else if (f == "--no-standardize")
      a.standardize = false;
    else if (f == "--dtype") {
      const std::string t = args.value();
      if (t != "f32" && t != "f64") throw InvalidArgument("--dtype '" + t + "': use f32 or f64");
      a.model.dtype = t == "f32" ? DType::f32 : DType::f64;
    } else if (f == "--mixed-precision")
      a.mixed_precision = true;
    else if (f == "--data-placement") {
      const std::string p = args.value();
      if (p == "auto")
        a.train.placement = ml::DataPlacement::automatic;
      else if (p == "device")
        a.train.placement = ml::DataPlacement::device;
      else if (p == "stream")
        a.train.placement = ml::DataPlacement::stream;
      else
        throw InvalidArgument("--data-placement '" + p + "': use auto, device or stream");
    } else if (f == "--backend")
      a.backend = args.value();
    else if (f == "--save")
      a.save = args.value();
    else if (f == "--json")
      a.json = true;
    else if (f == "--distributed")
      a.distributed = true;
    else if (f == "--overlap")
      a.parallel.overlap = true;
    else if (f == "--graphs")
      a.train.graphs = true;
    else {
      std::fprintf(stderr, "tandem train: unknown option '%s' (see tandem --help)\n", f.c_str());
      return 2;
    }
  }
  if (a.data.empty()) throw InvalidArgument("--data FILE is required (CSV, or IDX images with --labels FILE)");
  a.model.mixed_precision = a.mixed_precision;
  if (a.parallel.overlap && !a.distributed) throw InvalidArgument("--overlap goes with --distributed");
  if (a.parallel.overlap && a.train.graphs) {
    throw InvalidArgument("--graphs cannot go with --overlap: the overlapped sums start from inside backward");
  }

  // Data: load, split, standardise (fitted on the training split only).
  data::Dataset all = a.labels.empty() ? data::read_csv(a.data, csv_options(a.label_column, a.delimiter, a.header))
                                       : data::read_idx(a.data, a.labels);
  if (all.targets.empty()) throw InvalidArgument("the data has no label column; give --label-column");
  const std::int32_t classes = all.class_count();
  if (classes < 2) throw InvalidArgument(all.source + " has a single class; training a classifier needs two or more");
  if (classes > 65536 || static_cast<std::size_t>(classes) > all.rows) {
    throw InvalidArgument(all.source + ": the label column holds class indices up to " + std::to_string(classes - 1) +
                          " for " + std::to_string(all.rows) +
                          " samples, which looks like an ID or a value rather than a class; check --label-column");
  }
  data::Split split;
  if (a.test_fraction > 0) {
    split = data::train_test_split(all, a.test_fraction, a.split_seed);
  } else {
    split.train = all;
  }
  data::Standardizer st;
  if (a.standardize) {
    st = data::Standardizer::fit(split.train);
    st.apply(split.train);
    if (split.test.rows) st.apply(split.test);
  }

  if (a.layers.empty()) a.layers = {all.cols, 128, static_cast<std::size_t>(classes)};
  if (a.layers.front() != all.cols) {
    throw InvalidArgument("the data has " + std::to_string(all.cols) + " features, so --layers must start with " +
                          std::to_string(all.cols) + " (it starts with " + std::to_string(a.layers.front()) + ")");
  }
  if (a.layers.back() < static_cast<std::size_t>(classes)) {
    throw InvalidArgument("the data has " + std::to_string(classes) +
                          " classes, so the last of --layers must be at least " + std::to_string(classes));
  }
  Backend& be = a.backend.empty() ? default_backend() : get_backend(a.backend);
  ml::Mlp model(be, ml::layers_from_widths(a.layers, a.activation), a.model);
  model.standardizer = st;
  // --distributed: one replica per MPI rank (mpirun -np N tandem train --distributed ...); rank 0
  // prints and saves, every rank reports its throughput and time in allreduce at the end.
  dist::Communicator* comm = nullptr;
  if (a.distributed) {
    comm = &dist::Communicator::world();
    distributed_job = comm->size() > 1;
  }
  const bool root = comm == nullptr || comm->rank() == 0;
  if (!root) a.json = false;
  const bool quiet = !root;

  const bool adam = a.model.optimizer.kind == ml::OptimizerKind::adam;
  if (!a.json && !quiet) {
    if (comm != nullptr) {
      std::printf("data-parallel on %d ranks%s: each trains on its share of every batch of %zu\n", comm->size(),
                  dist::built_with_mpi() ? "" : " (this tandem was built without MPI: one process)",
                  a.train.batch_size);
    }
    std::printf("tandem train: %s: %zu train / %zu held-out samples, %zu features, %d classes\n", a.data.c_str(),
                split.train.rows, split.test.rows, all.cols, classes);
    std::printf("model %s (%s), %zu parameters, %s%s; backend %s\n", widths_text(a.layers).c_str(),
                std::string(name_of(a.activation)).c_str(), model.parameter_count(),
                std::string(name_of(a.model.dtype)).c_str(), a.mixed_precision ? " with bf16 matmuls" : "",
                be.name().c_str());
    std::printf("%s lr %g, batch %zu, %zu epochs, seed %llu\n", adam ? "adam" : "sgd", a.model.optimizer.learning_rate,
                a.train.batch_size, a.train.epochs, static_cast<unsigned long long>(a.train.seed));
  }
  Progress progress(!a.json && !quiet);
  a.train.on_batch = [&](std::size_t epoch, std::size_t done, std::size_t total) {
    progress.show(epoch, a.train.epochs, done, total);
  };
  const auto start = std::chrono::steady_clock::now();
  const data::Dataset* test = split.test.rows ? &split.test : nullptr;
  const auto on_epoch = [&](const ml::EpochReport& r) {
    progress.clear();
    if (a.json || quiet) return;
    std::printf("epoch %3zu/%zu  loss %.4f", r.epoch, a.train.epochs, r.train_loss);
    if (split.test.rows) {
      std::printf("  held-out loss %.4f  accuracy %5.1f%%", r.test_loss, 100 * r.test_accuracy);
    }
    std::printf("  %.3f s (data %.3f s%s)\n", r.seconds, r.data_wait_seconds,
                r.epoch != 1       ? ""
                : !r.streamed      ? ", kept on the device"
                : r.pinned_staging ? ", streamed through pinned staging"
                                   : ", streamed through host staging");
    std::fflush(stdout);
  };
  const auto reports = comm != nullptr ? dist::train(*comm, model, split.train, test, a.train, on_epoch, a.parallel)
                                       : ml::train(model, split.train, test, a.train, on_epoch);
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double train_seconds = 0;
  for (const auto& r : reports) train_seconds += r.seconds;
  const double per_epoch = train_seconds / double(reports.size());
  if (!a.save.empty() && root) model.save(a.save);
  std::string ranks_json;  // "distributed": per rank, for --json
  if (comm != nullptr) {
    // Per rank: samples/s over its own share, and seconds in allreduce and broadcast.
    std::vector<double> per_rank(2 * static_cast<std::size_t>(comm->size()), 0.0);
    const double own = double(split.train.rows) / double(comm->size()) * double(reports.size());
    per_rank[2 * static_cast<std::size_t>(comm->rank())] = own / train_seconds;
    per_rank[2 * static_cast<std::size_t>(comm->rank()) + 1] = comm->seconds();
    comm->allreduce(per_rank, dist::Combine::sum);
    if (!root) return 0;
    if (!a.json) {
      for (int r = 0; r < comm->size(); ++r) {
        std::printf("rank %d: %.0f samples/s, %.3f s in allreduce%s\n", r, per_rank[2 * std::size_t(r)],
                    per_rank[2 * std::size_t(r) + 1], a.parallel.overlap ? " (not hidden by backward)" : "");
      }
      std::printf("all ranks: %.0f samples/s\n", double(split.train.rows) * double(reports.size()) / train_seconds);
    }
    ranks_json = ", \"distributed\": {\"ranks\": " + std::to_string(comm->size()) +
                 ", \"overlap\": " + (a.parallel.overlap ? "true" : "false") + ", \"samples_per_second\": " +
                 json_number(double(split.train.rows) * double(reports.size()) / train_seconds) + ", \"per_rank\": [";
    for (int r = 0; r < comm->size(); ++r) {
      ranks_json += std::string(r ? ", " : "") + "{\"rank\": " + std::to_string(r) +
                    ", \"samples_per_second\": " + json_number(per_rank[2 * std::size_t(r)]) +
                    ", \"allreduce_seconds\": " + json_number(per_rank[2 * std::size_t(r) + 1]) + "}";
    }
    ranks_json += "]}";
  }

  const ml::EpochReport& last = reports.back();
  if (a.json) {
    std::printf("{\"command\": \"train\", \"data\": %s, \"backend\": %s, \"layers\": [", json_string(a.data).c_str(),
                json_string(be.name()).c_str());
    for (std::size_t i = 0; i < a.layers.size(); ++i) std::printf("%s%zu", i ? ", " : "", a.layers[i]);
    std::printf(
        "], \"activation\": %s, \"optimizer\": \"%s\", \"learning_rate\": %s, \"batch\": %zu, \"dtype\": \"%s\", "
        "\"mixed_precision\": %s, \"graphs\": %s, \"train_samples\": %zu, \"test_samples\": %zu, \"epochs\": [",
        json_string(std::string(name_of(a.activation))).c_str(), adam ? "adam" : "sgd",
        json_number(a.model.optimizer.learning_rate).c_str(), a.train.batch_size,
        std::string(name_of(a.model.dtype)).c_str(), a.mixed_precision ? "true" : "false",
        a.train.graphs ? "true" : "false", split.train.rows, split.test.rows);
    for (std::size_t i = 0; i < reports.size(); ++i) {
      const auto& r = reports[i];
      std::printf(
          "%s{\"epoch\": %zu, \"loss\": %s, \"test_loss\": %s, \"test_accuracy\": %s, \"seconds\": %s, "
          "\"data_wait_seconds\": %s}",
          i ? ", " : "", r.epoch, json_number(r.train_loss).c_str(), json_number(r.test_loss).c_str(),
          json_number(r.test_accuracy).c_str(), json_number(r.seconds).c_str(),
          json_number(r.data_wait_seconds).c_str());
    }
    std::printf("], \"test_accuracy\": %s, \"seconds_per_epoch\": %s, \"seconds\": %s, \"saved\": %s%s}\n",
                json_number(last.test_accuracy).c_str(), json_number(per_epoch).c_str(), json_number(total).c_str(),
                a.save.empty() ? "null" : json_string(a.save).c_str(), ranks_json.c_str());
    return 0;
  }
  if (split.test.rows) {
    std::printf("held-out accuracy %.2f%% on %zu samples; ", 100 * last.test_accuracy, split.test.rows);
  }
  std::printf("%.4f s per epoch, %.2f s in all\n", per_epoch, total);
  if (!a.save.empty()) std::printf("model saved to %s\n", a.save.c_str());
  return 0;
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
