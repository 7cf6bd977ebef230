// tandem predict: a saved model (tandem train --save, tandem regress --save) applied to a data set:
// one prediction per row on standard output and, where the data has labels or targets, how good
// they are.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "options.hpp"
#include "tandem/mlp.hpp"
#include "tandem/regression.hpp"
#include "tandem/tandem.hpp"

namespace tandem::cli {
namespace {

struct PredictArgs {
  std::string model, backend;
  DataArgs source;
  double min_accuracy = 0;
  JsonOption json;
};

// "mlp" or "linear", from the file's magic bytes.
std::string model_kind(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw IoError(path + ": is a directory, not a model file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open the file (" + std::strerror(errno) + ")");
  char magic[8] = {};
  in.read(magic, 8);
  if (in.gcount() == 8 && std::memcmp(magic, "TANDEMNN", 8) == 0) return "mlp";
  if (in.gcount() == 8 && std::memcmp(magic, "TANDEMLR", 8) == 0) return "linear";
  throw DataError(path + ": not a tandem model (written by tandem train --save or tandem regress --save)");
}

// The data with its label column when it has one: by default a file with one column more than
// the model's inputs has its last column as labels, one with exactly the inputs has none.
data::Dataset load_for(const DataArgs& source, CLI::Option* label_option, std::size_t inputs) {
  if (!source.labels.empty() || label_option->count() > 0) return source.load();
  DataArgs none = source;
  none.label_column = "none";
  data::Dataset d = none.load();
  if (d.cols == inputs + 1) {
    data::Dataset split = d;
    split.cols = inputs;
    split.features.clear();
    split.targets.resize(d.rows);
    for (std::size_t r = 0; r < d.rows; ++r) {
      const auto row = d.row(r);
      split.features.insert(split.features.end(), row.begin(), row.begin() + static_cast<std::ptrdiff_t>(inputs));
      split.targets[r] = row[inputs];
    }
    return split;
  }
  return d;
}

void check_columns(const data::Dataset& d, std::size_t inputs, const std::string& model) {
  if (d.cols != inputs) {
    throw DataError(d.source + " has " + std::to_string(d.cols) + " feature columns, but the model " + model +
                    " takes " + std::to_string(inputs) + " (give --label-column if the labels are elsewhere)");
  }
}

int predict_mlp(PredictArgs& a, CLI::Option* label_option, Backend& be) {
  ml::Mlp model = ml::Mlp::load(be, a.model);
  data::Dataset d = load_for(a.source, label_option, model.inputs());
  check_columns(d, model.inputs(), a.model);
  if (!model.standardizer.mean.empty()) model.standardizer.apply(d);
  const std::vector<std::int32_t> classes = ml::predict_classes(model, d);
  const bool labelled = !d.targets.empty();
  std::size_t correct = 0;
  if (labelled) {
    const std::vector<std::int32_t> labels = d.class_labels();
    for (std::size_t r = 0; r < d.rows; ++r) correct += classes[r] == labels[r];
  }
  const double accuracy = labelled ? double(correct) / double(d.rows) : 0;
  if (!a.json.to_stdout()) {
    for (std::int32_t c : classes) std::printf("%d\n", c);
  }
  if (labelled) {
    std::fprintf(stderr, "tandem predict: %s on %s: accuracy %.2f%% (%zu of %zu)\n", a.model.c_str(),
                 a.source.data.c_str(), 100 * accuracy, correct, d.rows);
  } else {
    std::fprintf(stderr, "tandem predict: %s on %s: %zu rows classified (no labels to score)\n", a.model.c_str(),
                 a.source.data.c_str(), d.rows);
  }
  a.json.write(Json{{"command", "predict"},
                    {"model", a.model},
                    {"kind", "mlp"},
                    {"data", a.source.data},
                    {"backend", be.name()},
                    {"rows", d.rows},
                    {"classes", classes},
                    {"accuracy", labelled ? number(accuracy) : Json(nullptr)},
                    {"correct", labelled ? Json(correct) : Json(nullptr)}});
  if (a.min_accuracy > 0) {
    if (!labelled) throw InvalidArgument("--min-accuracy needs labels in the data");
    if (accuracy < a.min_accuracy) {
      std::fprintf(stderr, "tandem predict: accuracy %.2f%% is below --min-accuracy %.2f%%\n", 100 * accuracy,
                   100 * a.min_accuracy);
      return 1;
    }
  }
  return 0;
}

int predict_linear(PredictArgs& a, CLI::Option* label_option, Backend& be) {
  const ml::LinearModel model = ml::load_linear_model(a.model);
  const data::Dataset d = load_for(a.source, label_option, model.coefficients.size());
  check_columns(d, model.coefficients.size(), a.model);
  const std::vector<double> values = ml::predict(be, model, d);
  if (!a.json.to_stdout()) {
    for (double v : values) std::printf("%.17g\n", v);
  }
  ml::RegressionMetrics m{};
  const bool scored = !d.targets.empty();
  if (scored) {
    m = ml::evaluate(be, model, d);
    std::fprintf(stderr, "tandem predict: %s on %s: R^2 %.6f, MSE %.6g over %zu rows\n", a.model.c_str(),
                 a.source.data.c_str(), m.r2, m.mse, d.rows);
  } else {
    std::fprintf(stderr, "tandem predict: %s on %s: %zu rows predicted (no targets to score)\n", a.model.c_str(),
                 a.source.data.c_str(), d.rows);
  }
  if (a.min_accuracy > 0) throw InvalidArgument("--min-accuracy is for classifiers; this is a linear model");
  a.json.write(Json{{"command", "predict"},
                    {"model", a.model},
                    {"kind", "linear"},
                    {"data", a.source.data},
                    {"backend", be.name()},
                    {"rows", d.rows},
                    {"values", values},
                    {"r2", scored ? number(m.r2) : Json(nullptr)},
                    {"mse", scored ? number(m.mse) : Json(nullptr)}});
  return 0;
}

}  // namespace

Command add_predict(CLI::App& app) {
  auto a = std::make_shared<PredictArgs>();
  CLI::App* sub = app.add_subcommand(
      "predict",
      "apply a saved model (train --save, regress --save) to a data set: one prediction per row on standard "
      "output, and with labels (or targets) in the data the accuracy (or R^2) on standard error");
  sub->add_option("--model", a->model, "the model file")->required()->type_name("FILE");
  a->source.add(sub,
                "the label (or target) column; default: the last column when the file has one column more than "
                "the model's inputs, else none");
  CLI::Option* label_option = sub->get_option("--label-column");
  label_option->default_str("");
  sub->add_option("--backend", a->backend, "backend to run on (default: TANDEM_BACKEND, else auto)")->type_name("NAME");
  sub->add_option("--min-accuracy", a->min_accuracy, "exit 1 when the accuracy is below X (0 to 1; classifiers)")
      ->check(real_number(0, 1));
  a->json.add(sub, "every prediction and the score");
  return {sub, [a, label_option] {
            Backend& be = a->backend.empty() ? default_backend() : get_backend(a->backend);
            return model_kind(a->model) == "mlp" ? predict_mlp(*a, label_option, be)
                                                 : predict_linear(*a, label_option, be);
          }};
}

}  // namespace tandem::cli
