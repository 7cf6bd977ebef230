// tandem regress: linear regression with an intercept on a backend; prints the coefficients,
// the intercept, R^2 and the time.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "args.hpp"
#include "cli.hpp"
#include "tandem/regression.hpp"
#include "tandem/tandem.hpp"

namespace tandem::cli {

int regress_main(const std::vector<std::string>& argv) {
  std::string data_path, target_path, target_column, backend;
  ml::RegressionOptions o;
  double test_fraction = 0;
  std::uint64_t seed = 42;
  bool json = false;
  Args args(argv);
  while (args.next()) {
    const std::string& f = args.flag();
    if (f == "--data") data_path = args.value();
    else if (f == "--target") target_path = args.value();
    else if (f == "--target-column") target_column = args.value();
    else if (f == "--solver") {
      const std::string s = args.value();
      if (s != "closed-form" && s != "gradient-descent") {
        throw InvalidArgument("--solver '" + s + "': use closed-form or gradient-descent");
      }
      o.solver = s == "closed-form" ? ml::Solver::closed_form : ml::Solver::gradient_descent;
    } else if (f == "--epochs") o.epochs = args.count();
    else if (f == "--batch") o.batch_size = args.count(0);
    else if (f == "--lr") o.learning_rate = args.real(1e-12, 1e3);
    else if (f == "--tolerance") o.tolerance = args.real(0, 1);
    else if (f == "--no-standardize") o.standardize = false;
    else if (f == "--dtype") {
      const std::string t = args.value();
      if (t != "f32" && t != "f64") throw InvalidArgument("--dtype '" + t + "': use f32 or f64");
      o.dtype = t == "f32" ? DType::f32 : DType::f64;
    } else if (f == "--test-fraction") test_fraction = args.real(0, 0.99);
    else if (f == "--seed") seed = o.seed = args.count(0);
    else if (f == "--backend") backend = args.value();
    else if (f == "--json") json = true;
    else {
      std::fprintf(stderr, "tandem regress: unknown option '%s' (see tandem --help)\n", f.c_str());
      return 2;
    }
  }
  if (data_path.empty()) throw InvalidArgument("--data FILE is required");
  if (target_path.empty() == target_column.empty()) {
    throw InvalidArgument("give the target either as a file (--target y.csv) or as a column of --data (--target-column last)");
  }
  data::CsvOptions csv;
  if (!target_column.empty()) {
    csv.label_column = data::parse_label_column(target_column);
    if (!csv.label_column) throw InvalidArgument("--target-column cannot be 'none'");
  }
  data::Dataset all = data::read_csv(data_path, csv);
  if (!target_path.empty()) data::attach_targets(all, data::read_csv(target_path));
  data::Split split;
  if (test_fraction > 0) {
    split = data::train_test_split(all, test_fraction, seed);
  } else {
    split.train = all;
  }

  Backend& be = backend.empty() ? default_backend() : get_backend(backend);
  const auto start = std::chrono::steady_clock::now();
  const ml::LinearModel model = ml::fit_linear_regression(be, split.train, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const ml::RegressionMetrics fit = ml::evaluate(be, model, split.train, o.dtype);
  ml::RegressionMetrics held{};
  if (split.test.rows) held = ml::evaluate(be, model, split.test, o.dtype);
  const bool gd = o.solver == ml::Solver::gradient_descent;

  if (json) {
    std::printf("{\"command\": \"regress\", \"data\": %s, \"backend\": %s, \"solver\": \"%s\", \"dtype\": \"%s\", "
                "\"samples\": %zu, \"features\": %zu, \"coefficients\": [",
                json_string(data_path).c_str(), json_string(be.name()).c_str(), gd ? "gradient-descent" : "closed-form",
                std::string(name_of(o.dtype)).c_str(), split.train.rows, all.cols);
    for (std::size_t j = 0; j < model.coefficients.size(); ++j) {
      std::printf("%s%s", j ? ", " : "", json_number(model.coefficients[j]).c_str());
    }
    std::printf("], \"intercept\": %s, \"r2\": %s, \"mse\": %s, \"test_r2\": %s, \"test_mse\": %s, \"seconds\": %s, "
                "\"epochs_run\": %zu, \"converged\": %s, \"loss_history\": [",
                json_number(model.intercept).c_str(), json_number(fit.r2).c_str(), json_number(fit.mse).c_str(),
                split.test.rows ? json_number(held.r2).c_str() : "null",
                split.test.rows ? json_number(held.mse).c_str() : "null", json_number(seconds).c_str(),
                model.epochs_run, model.converged ? "true" : "false");
    for (std::size_t e = 0; e < model.loss_history.size(); ++e) {
      std::printf("%s%s", e ? ", " : "", json_number(model.loss_history[e]).c_str());
    }
    std::printf("]}\n");
    return 0;
  }
  std::printf("tandem regress: %s: %zu samples, %zu features; %s on %s (%s)\n", data_path.c_str(), split.train.rows,
              all.cols, gd ? "gradient descent" : "closed form (CholeskyQR2)", be.name().c_str(),
              std::string(name_of(o.dtype)).c_str());
  for (std::size_t j = 0; j < model.coefficients.size(); ++j) {
    std::printf("  coefficient %-4zu %.10g\n", j, model.coefficients[j]);
  }
  std::printf("  intercept        %.10g\n", model.intercept);
  std::printf("R^2 %.6f, MSE %.6g on the %zu fitted samples", fit.r2, fit.mse, split.train.rows);
  if (split.test.rows) std::printf("; held-out R^2 %.6f, MSE %.6g on %zu", held.r2, held.mse, split.test.rows);
  std::printf("\n");
  if (gd) {
    std::printf("%zu epochs, %s; loss %.6g -> %.6g\n", model.epochs_run,
                model.converged ? "converged" : "stopped at the epoch limit (not converged)",
                model.loss_history.front(), model.loss_history.back());
  }
  std::printf("fitted in %.4f s\n", seconds);
  return 0;
}

}  // namespace tandem::cli
