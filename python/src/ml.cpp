// Data, linear regression and the MLP from Python. Features and targets are whatever NumPy makes a
// float64 array of (NumPy arrays of any dtype, tandem.Arrays, lists), converted as
// np.ascontiguousarray(x, dtype=float64) does; training and evaluation release the GIL, and a
// model takes one call at a time (its own lock), as ml::Mlp asks.
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <memory>
#include <mutex>
#include <optional>

#include "bindings.hpp"

namespace tandem::py {
namespace {

// A float64 host array of Dims dimensions, from any array-like (the caster below).
template <int Dims>
struct HostDoubles {
  nb::ndarray<const double, nb::ndim<Dims>, nb::c_contig, nb::device::cpu> array;
  std::size_t shape(std::size_t i) const { return array.shape(i); }
  const double* data() const { return array.data(); }
};

}  // namespace
}  // namespace tandem::py

namespace nanobind::detail {

// numpy.ascontiguousarray(src, dtype="float64"), then nanobind's own ndarray check (dimensions).
// Typed as numpy.typing.ArrayLike in the stubs.
template <int Dims>
struct type_caster<tandem::py::HostDoubles<Dims>> {
  using Doubles = tandem::py::HostDoubles<Dims>;
  NB_TYPE_CASTER(Doubles, const_name("numpy.typing.ArrayLike"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    try {
      const object converted = module_::import_("numpy").attr("ascontiguousarray")(src, arg("dtype") = "float64");
      value.array = cast<decltype(value.array)>(converted);
      return true;
    } catch (const std::exception&) {  // not array-like, or the wrong number of dimensions
      PyErr_Clear();
      return false;
    }
  }
  static handle from_cpp(const Doubles&, rv_policy, cleanup_list*) noexcept { return none().release(); }
};

}  // namespace nanobind::detail

namespace tandem::py {

namespace {

const ml::TrainOptions kTrain;  // the defaults C++ and the CLI have

using Features = HostDoubles<2>;
using Targets = HostDoubles<1>;
using Release = nb::call_guard<nb::gil_scoped_release>;

data::Dataset dataset(const Features& x, const std::optional<Targets>& y, const char* source) {
  data::Dataset d;
  d.rows = x.shape(0);
  d.cols = x.shape(1);
  d.features.assign(x.data(), x.data() + d.rows * d.cols);
  if (y) {
    if (y->shape(0) != d.rows) {
      throw ShapeMismatch(std::string(source) + ": " + std::to_string(d.rows) + " rows of features but " +
                          std::to_string(y->shape(0)) + " targets");
    }
    d.targets.assign(y->data(), y->data() + d.rows);
  }
  d.source = source;
  return d;
}

template <class T>
nb::object numpy_of(std::vector<T> values, std::vector<std::size_t> shape) {
  auto* owned = new std::vector<T>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T>(owned->data(), shape.size(), shape.data(), owner));
}

nb::tuple features_targets(const data::Dataset& d) {
  nb::object y = d.targets.empty() ? nb::none() : numpy_of(d.targets, {d.rows});
  return nb::make_tuple(numpy_of(d.features, {d.rows, d.cols}), y);
}

nb::dict epoch_dict(const ml::EpochReport& r) {
  nb::dict d;
  d["epoch"] = r.epoch;
  d["train_loss"] = r.train_loss;
  d["test_loss"] = r.test_loss;
  d["test_accuracy"] = r.test_accuracy;
  d["seconds"] = r.seconds;
  return d;
}

ml::OptimizerKind parse_optimizer(const std::string& name) {
  if (name == "adam") return ml::OptimizerKind::adam;
  if (name == "sgd") return ml::OptimizerKind::sgd;
  throw InvalidArgument("unknown optimizer '" + name + "': use adam or sgd");
}

ml::LossKind parse_loss(const std::string& name) {
  if (name == "softmax_cross_entropy") return ml::LossKind::softmax_cross_entropy;
  if (name == "mse") return ml::LossKind::mse;
  throw InvalidArgument("unknown loss '" + name + "': use softmax_cross_entropy or mse");
}

// tandem.Mlp: the model and the lock that keeps two Python threads (the GIL released) from
// running it at once.
struct Model {
  std::unique_ptr<ml::Mlp> mlp;
  std::mutex mutex;
};

// read_csv, train_test_split and tandem.Standardizer: data in and out of NumPy.
void bind_data(nb::module_& m) {
  m.def(
      "read_csv",
      [](const std::string& path, std::optional<long> label_column) {
        const data::CsvOptions o{.label_column = label_column};
        data::Dataset d;
        {
          nb::gil_scoped_release release;
          d = data::read_csv(path, o);
        }
        return features_targets(d);
      },
      nb::arg("path"), nb::arg("label_column") = -1,
      "(features, targets) of a CSV file (gzip-compressed or not) as float64 NumPy arrays; label_column\n"
      "counts from 0 (negative: from the end; None: no targets, returned as None).");
  m.def(
      "train_test_split",
      [](const Features& x, const Targets& y, double test_fraction, std::uint64_t seed) {
        const data::Split s = data::train_test_split(dataset(x, y, "train_test_split"), test_fraction, seed);
        const nb::tuple train = features_targets(s.train), test = features_targets(s.test);
        return nb::make_tuple(train[0], train[1], test[0], test[1]);
      },
      nb::arg("x"), nb::arg("y"), nb::arg("test_fraction") = 0.2, nb::arg("seed") = 42,
      "(x_train, y_train, x_test, y_test), shuffled with tandem's generator: the split `tandem train` makes\n"
      "with the same seed (its default is 42).");

  nb::class_<data::Standardizer>(m, "Standardizer", "Per-feature (x - mean) / scale, fitted on training data.")
      .def(nb::init<>())
      .def_static(
          "fit", [](const Features& x) { return data::Standardizer::fit(dataset(x, std::nullopt, "fit")); },
          nb::arg("x"))
      .def(
          "apply",
          [](const data::Standardizer& s, const Features& x) {
            data::Dataset d = dataset(x, std::nullopt, "Standardizer.apply");
            s.apply(d);
            return numpy_of(std::move(d.features), {d.rows, d.cols});
          },
          nb::arg("x"), "The standardised features (a new array).")
      .def_rw("mean", &data::Standardizer::mean)
      .def_rw("scale", &data::Standardizer::scale);
}

// tandem.LinearModel and fit_linear_regression().
void bind_linear_regression(nb::module_& m) {
  nb::class_<ml::LinearModel>(m, "LinearModel", "y = x @ coefficients + intercept, from fit_linear_regression().")
      .def_ro("coefficients", &ml::LinearModel::coefficients)
      .def_ro("intercept", &ml::LinearModel::intercept)
      .def_ro("loss_history", &ml::LinearModel::loss_history)
      .def_ro("epochs_run", &ml::LinearModel::epochs_run)
      .def_ro("converged", &ml::LinearModel::converged)
      .def(
          "predict",
          [](const ml::LinearModel& model, const Features& x, nb::handle backend, nb::handle dtype) {
            Backend& be = backend_arg(backend);
            const DType t = dtype_arg(dtype, DType::f64);
            const data::Dataset d = dataset(x, std::nullopt, "predict");
            std::vector<double> y;
            {
              nb::gil_scoped_release release;
              y = ml::predict(be, model, d, t);
            }
            return numpy_of(std::move(y), {d.rows});
          },
          nb::arg("x"), nb::arg("backend") = nb::none(), nb::arg("dtype") = nb::none())
      .def(
          "evaluate",
          [](const ml::LinearModel& model, const Features& x, const Targets& y, nb::handle backend) {
            Backend& be = backend_arg(backend);
            const data::Dataset d = dataset(x, y, "evaluate");
            nb::gil_scoped_release release;
            const ml::RegressionMetrics r = ml::evaluate(be, model, d);
            return std::pair(r.mse, r.r2);
          },
          nb::arg("x"), nb::arg("y"), nb::arg("backend") = nb::none(), "(mse, r2) on this data.")
      .def(
          "save", [](const ml::LinearModel& model, const std::string& path) { ml::save(model, path); }, nb::arg("path"))
      .def_static("load", &ml::load_linear_model, nb::arg("path"));

  m.def(
      "fit_linear_regression",
      [](const Features& x, const Targets& y, nb::handle backend, const std::string& solver, nb::handle dtype,
         bool standardize, double learning_rate, std::size_t epochs, std::size_t batch_size, double tolerance,
         std::uint64_t seed) {
        Backend& be = backend_arg(backend);
        ml::RegressionOptions o;
        if (solver == "closed_form") {
          o.solver = ml::Solver::closed_form;
        } else if (solver == "gradient_descent") {
          o.solver = ml::Solver::gradient_descent;
        } else {
          throw InvalidArgument("unknown solver '" + solver + "': use closed_form or gradient_descent");
        }
        o.dtype = dtype_arg(dtype, DType::f64);
        o.standardize = standardize;
        o.learning_rate = learning_rate;
        o.epochs = epochs;
        o.batch_size = batch_size;
        o.tolerance = tolerance;
        o.seed = seed;
        const data::Dataset d = dataset(x, y, "fit_linear_regression");
        nb::gil_scoped_release release;
        return ml::fit_linear_regression(be, d, o);
      },
      nb::arg("x"), nb::arg("y"), nb::arg("backend") = nb::none(), nb::arg("solver") = "closed_form",
      nb::arg("dtype") = nb::none(), nb::arg("standardize") = true, nb::arg("learning_rate") = 0.1,
      nb::arg("epochs") = 1000, nb::arg("batch_size") = 0, nb::arg("tolerance") = 1e-9, nb::arg("seed") = 1,
      "Least squares with an intercept: closed_form (QR) or gradient_descent; dtype float64 (default) or float32.");
}

// tandem.Mlp's constructor and properties.
void bind_mlp_model(nb::class_<Model>& cls) {
  cls.def(
         "__init__",
         [](Model* self, std::vector<std::size_t> widths, nb::handle backend, const std::string& activation,
            const std::string& loss, const std::string& optimizer, double learning_rate, double momentum,
            double weight_decay, std::uint64_t seed, nb::handle dtype, bool mixed_precision) {
           Backend& be = backend_arg(backend);
           ml::MlpOptions o;
           o.loss = parse_loss(loss);
           o.optimizer.kind = parse_optimizer(optimizer);
           o.optimizer.learning_rate = learning_rate;
           o.optimizer.momentum = momentum;
           o.optimizer.weight_decay = weight_decay;
           o.seed = seed;
           o.dtype = dtype_arg(dtype, DType::f32);
           o.mixed_precision = mixed_precision;
           auto mlp = std::make_unique<ml::Mlp>(be, ml::layers_from_widths(widths, parse_activation(activation)), o);
           new (self) Model{std::move(mlp), {}};
         },
         nb::arg("widths"), nb::arg("backend") = nb::none(), nb::arg("activation") = "relu",
         nb::arg("loss") = "softmax_cross_entropy", nb::arg("optimizer") = "adam", nb::arg("learning_rate") = 1e-3,
         nb::arg("momentum") = 0.9, nb::arg("weight_decay") = 0.0, nb::arg("seed") = 1, nb::arg("dtype") = nb::none(),
         nb::arg("mixed_precision") = false,
         "widths: inputs, hidden..., outputs ([64, 128, 10]). As `tandem train`'s options.")
      .def_prop_ro("backend", [](const Model& model) { return model.mlp->backend().shared_from_this(); })
      .def_prop_ro("inputs", [](const Model& model) { return model.mlp->inputs(); })
      .def_prop_ro("outputs", [](const Model& model) { return model.mlp->outputs(); })
      .def_prop_ro("parameter_count", [](const Model& model) { return model.mlp->parameter_count(); })
      .def_prop_rw(
          "standardizer",
          [](Model& model) {
            std::lock_guard lock(model.mutex);
            return model.mlp->standardizer;
          },
          [](Model& model, const data::Standardizer& st) {
            std::lock_guard lock(model.mutex);
            model.mlp->standardizer = st;
          },
          "Saved with the model; not applied by predict/evaluate.");
}

// tandem.Mlp's training, evaluation, inference, save and load.
void bind_mlp_training(nb::class_<Model>& cls) {
  cls.def(
         "train",
         [](Model& model, const Features& x, const Targets& y, std::size_t epochs, std::size_t batch_size,
            std::uint64_t seed, std::optional<Features> x_test, std::optional<Targets> y_test, bool graphs) {
           if (x_test.has_value() != y_test.has_value()) {
             throw InvalidArgument("train: give both x_test and y_test, or neither");
           }
           const data::Dataset train = dataset(x, y, "train");
           std::optional<data::Dataset> test;
           if (x_test) test = dataset(*x_test, *y_test, "test");
           ml::TrainOptions o;
           o.epochs = epochs;
           o.batch_size = batch_size;
           o.seed = seed;
           o.graphs = graphs;
           std::vector<ml::EpochReport> reports;
           {
             nb::gil_scoped_release release;
             std::lock_guard lock(model.mutex);
             reports = ml::train(*model.mlp, train, test ? &*test : nullptr, o);
           }
           nb::list out;
           for (const auto& r : reports) out.append(epoch_dict(r));
           return out;
         },
         nb::arg("x"), nb::arg("y"), nb::arg("epochs") = kTrain.epochs, nb::arg("batch_size") = kTrain.batch_size,
         nb::arg("seed") = 1, nb::arg("x_test") = nb::none(), nb::arg("y_test") = nb::none(), nb::arg("graphs") = false,
         "Trains on (x, y) (y: class indices or values) and returns one dict per epoch (losses, accuracies,\n"
         "seconds); with x_test/y_test, the held-out loss and accuracy after each epoch.")
      .def(
          "evaluate",
          [](Model& model, const Features& x, const Targets& y, std::size_t batch_size) {
            const data::Dataset d = dataset(x, y, "evaluate");
            nb::gil_scoped_release release;
            std::lock_guard lock(model.mutex);
            const ml::Evaluation e = ml::evaluate(*model.mlp, d, batch_size);
            return std::pair(e.loss, e.accuracy);
          },
          nb::arg("x"), nb::arg("y"), nb::arg("batch_size") = 1024, "(loss, accuracy); accuracy is NaN for MSE.")
      .def(
          "predict",
          [](Model& model, const Features& x, std::size_t batch_size) {
            const data::Dataset d = dataset(x, std::nullopt, "predict");
            std::vector<std::int32_t> classes;
            {
              nb::gil_scoped_release release;
              std::lock_guard lock(model.mutex);
              classes = ml::predict_classes(*model.mlp, d, batch_size);
            }
            return numpy_of(std::move(classes), {d.rows});
          },
          nb::arg("x"), nb::arg("batch_size") = 1024, "The class of each row (int32).")
      .def(
          "forward",
          [](Model& model, const Array& x) {
            std::lock_guard lock(model.mutex);
            const Matrix& y = model.mlp->forward(x.matrix("Mlp.forward"));
            Array out = empty(model.mlp->backend(), y.buffer.dtype(), {y.rows, y.cols});
            tandem::copy(y.buffer.slice(0, static_cast<std::size_t>(y.rows * y.cols)), out.buffer);
            return out;
          },
          nb::arg("x"), Release(), "The outputs (before the loss) for a batch x on the model's backend.")
      .def(
          "save",
          [](Model& model, const std::string& path) {
            std::lock_guard lock(model.mutex);
            model.mlp->save(path);
          },
          nb::arg("path"), Release())
      .def_static(
          "load",
          [](const std::string& path, nb::handle backend) {
            Backend& be = backend_arg(backend);
            auto mlp = std::make_unique<ml::Mlp>(ml::Mlp::load(be, path));
            return new Model{std::move(mlp), {}};
          },
          nb::arg("path"), nb::arg("backend") = nb::none(), nb::rv_policy::take_ownership);
}

}  // namespace

void bind_ml(nb::module_& m) {
  bind_data(m);
  bind_linear_regression(m);
  nb::class_<Model> cls(m, "Mlp",
                        "A multi-layer perceptron on a backend: Linear layers with an activation between them.");
  bind_mlp_model(cls);
  bind_mlp_training(cls);
}

}  // namespace tandem::py
