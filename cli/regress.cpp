// tandem regress: linear regression with an intercept on a backend; prints the coefficients,
// the intercept, R^2 and the time, and saves the model for tandem predict.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "options.hpp"
#include "tandem/regression.hpp"
#include "tandem/tandem.hpp"

namespace tandem::cli {
namespace {

struct RegressArgs {
  std::string data, target, target_column, backend, save, solver = "closed-form", dtype = "f64";
  ml::RegressionOptions o;
  double test_fraction = 0;
  std::uint64_t seed = 42;
  bool no_standardize = false;
  CLI::Option* seed_option = nullptr;
  JsonOption json;
};

int run_regress(RegressArgs& a) {
  if (a.target.empty() == a.target_column.empty()) {
    throw InvalidArgument(
        "give the target either as a file (--target y.csv) or as a column of --data (--target-column last)");
  }
  if (!a.save.empty()) check_writable(a.save, {a.data, a.target});
  ml::RegressionOptions o = a.o;
  o.solver = a.solver == "closed-form" ? ml::Solver::closed_form : ml::Solver::gradient_descent;
  o.dtype = a.dtype == "f32" ? DType::f32 : DType::f64;
  o.standardize = !a.no_standardize;
  if (a.seed_option->count() > 0) o.seed = a.seed;  // else the shuffling keeps its own default
  data::CsvOptions csv;
  if (!a.target_column.empty()) {
    csv.label_column = data::parse_label_column(a.target_column);
    if (!csv.label_column) throw InvalidArgument("--target-column cannot be 'none'");
  }
  data::Dataset all = data::read_csv(a.data, csv);
  if (!a.target.empty()) data::attach_targets(all, data::read_csv(a.target));
  data::Split split;
  if (a.test_fraction > 0) {
    split = data::train_test_split(all, a.test_fraction, a.seed);
  } else {
    split.train = all;
  }

  Backend& be = a.backend.empty() ? default_backend() : get_backend(a.backend);
  const auto start = std::chrono::steady_clock::now();
  const ml::LinearModel model = ml::fit_linear_regression(be, split.train, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const ml::RegressionMetrics fit = ml::evaluate(be, model, split.train, o.dtype);
  ml::RegressionMetrics held{};
  if (split.test.rows) held = ml::evaluate(be, model, split.test, o.dtype);
  const bool gd = o.solver == ml::Solver::gradient_descent;
  if (!a.save.empty()) ml::save(model, a.save);

  if (!a.json.to_stdout()) {
    std::printf("tandem regress: %s: %zu samples, %zu features; %s on %s (%s)\n", a.data.c_str(), split.train.rows,
                all.cols, gd ? "gradient descent" : "closed form (CholeskyQR2)", be.name().c_str(), a.dtype.c_str());
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
    if (!a.save.empty()) std::printf("model saved to %s\n", a.save.c_str());
  }
  Json history = Json::array();
  for (double loss : model.loss_history) history.push_back(number(loss));
  a.json.write(Json{{"command", "regress"},
                    {"data", a.data},
                    {"backend", be.name()},
                    {"solver", a.solver},
                    {"dtype", a.dtype},
                    {"samples", split.train.rows},
                    {"features", all.cols},
                    {"coefficients", model.coefficients},
                    {"intercept", number(model.intercept)},
                    {"r2", number(fit.r2)},
                    {"mse", number(fit.mse)},
                    {"test_r2", split.test.rows ? number(held.r2) : Json(nullptr)},
                    {"test_mse", split.test.rows ? number(held.mse) : Json(nullptr)},
                    {"seconds", seconds},
                    {"epochs_run", model.epochs_run},
                    {"converged", model.converged},
                    {"loss_history", history},
                    {"saved", a.save.empty() ? Json(nullptr) : Json(a.save)}});
  return 0;
}

}  // namespace

Command add_regress(CLI::App& app) {
  auto a = std::make_shared<RegressArgs>();
  CLI::App* sub = app.add_subcommand(
      "regress", "linear regression with an intercept: coefficients, intercept, R^2, time; --save keeps the model");
  sub->add_option("--data", a->data, "features (CSV, gzip or not)")->required()->type_name("FILE");
  sub->add_option("--target", a->target, "the target as a file")->type_name("FILE");
  sub->add_option("--target-column", a->target_column, "the target as a column of --data (last, first, an index)")
      ->type_name("C");
  sub->add_option("--solver", a->solver, "closed-form (CholeskyQR2) or gradient-descent")
      ->check(CLI::IsMember({"closed-form", "gradient-descent"}))
      ->capture_default_str();
  sub->add_option("--epochs", a->o.epochs, "gradient descent: passes over the data")
      ->check(whole_number(1))
      ->capture_default_str();
  sub->add_option("--batch", a->o.batch_size, "gradient descent: samples per step (0: all)")
      ->check(whole_number(0))
      ->capture_default_str();
  sub->add_option("--lr", a->o.learning_rate, "gradient descent: learning rate")
      ->check(real_number(1e-12, 1e3))
      ->capture_default_str();
  sub->add_option("--tolerance", a->o.tolerance, "gradient descent: stop when the loss improves less than this")
      ->check(real_number(0, 1))
      ->capture_default_str();
  sub->add_flag("--no-standardize", a->no_standardize, "gradient descent on the raw features");
  sub->add_option("--dtype", a->dtype, "compute type")->check(CLI::IsMember({"f32", "f64"}))->capture_default_str();
  sub->add_option("--test-fraction", a->test_fraction, "held-out share (0: none)")
      ->check(real_number(0, 0.99))
      ->capture_default_str();
  a->seed_option = sub->add_option("--seed", a->seed, "split and shuffling seed")
                       ->check(whole_number(0, UINT64_MAX))
                       ->capture_default_str();
  sub->add_option("--backend", a->backend, "backend to fit on (default: TANDEM_BACKEND, else auto)")->type_name("NAME");
  sub->add_option("--save", a->save, "write the fitted model (versioned, checksummed) for tandem predict")
      ->type_name("FILE");
  a->json.add(sub, "the fit");
  return {sub, [a] { return run_regress(*a); }};
}

}  // namespace tandem::cli
