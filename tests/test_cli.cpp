// The tandem command line, run in-process: exit codes, JSON that round-trips exactly, saved
// models that predict, the JUnit report, and the noise rule of bench/compare.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../cli/cli.hpp"
#include "../cli/json.hpp"
#include "../cli/sweep.hpp"
#include "tandem/mlp.hpp"
#include "tandem/regression.hpp"
#include "tandem/tandem.hpp"

namespace {

using namespace tandem;
namespace fs = std::filesystem;

int tandem_cli(std::initializer_list<std::string> args) {
  std::vector<std::string> all = {"tandem"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<const char*> argv;
  for (const std::string& a : all) argv.push_back(a.c_str());
  return cli::run(static_cast<int>(argv.size()), argv.data());
}

std::string scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("tandem_cli_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(slurp(path)); }

std::string data_file(const char* name) { return std::string(TANDEM_DATA_DIR) + "/" + name; }

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

#ifdef TANDEM_TEST_HAVE_ZLIB
TEST_CASE("regress --json prints every coefficient exactly: parsed back, they equal the library's fit") {
  const std::string out = scratch("regress.json");
  REQUIRE(tandem_cli({"regress", "--data", data_file("diabetes_data_raw.csv.gz"), "--target",
                      data_file("diabetes_target.csv.gz"), "--backend", "reference", "--json", out}) == 0);
  const nlohmann::json doc = read_json(out);
  data::Dataset d = data::read_csv(data_file("diabetes_data_raw.csv.gz"));
  data::attach_targets(d, data::read_csv(data_file("diabetes_target.csv.gz")));
  const ml::LinearModel fit = ml::fit_linear_regression(get_backend("reference"), d);
  REQUIRE(doc["coefficients"].size() == fit.coefficients.size());
  for (std::size_t j = 0; j < fit.coefficients.size(); ++j) {
    CHECK(doc["coefficients"][j].get<double>() == fit.coefficients[j]);  // bit for bit, not %.10g
  }
  CHECK(doc["intercept"].get<double>() == fit.intercept);
}

TEST_CASE("regress --save writes a model that predict applies: the values equal the library's, exactly") {
  const std::string model = scratch("diabetes.model"), out = scratch("predict.json");
  REQUIRE(tandem_cli({"regress", "--data=" + data_file("diabetes_data_raw.csv.gz"),
                      "--target=" + data_file("diabetes_target.csv.gz"), "--backend=reference", "--save", model}) == 0);
  const ml::LinearModel saved = ml::load_linear_model(model);
  REQUIRE(tandem_cli({"predict", "--model", model, "--data", data_file("diabetes_data_raw.csv.gz"), "--backend",
                      "reference", "--json", out}) == 0);
  const nlohmann::json doc = read_json(out);
  const data::Dataset x = data::read_csv(data_file("diabetes_data_raw.csv.gz"));
  const std::vector<double> want = ml::predict(get_backend("reference"), saved, x);
  REQUIRE(doc["values"].size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(doc["values"][i].get<double>() == want[i]);
  CHECK(doc["kind"] == "linear");
  CHECK(doc["r2"].is_null());  // the features file has no target column
}

TEST_CASE("train --save, then predict scores the saved classifier on labelled data") {
  const std::string model = scratch("digits.model"), out = scratch("digits.json");
  REQUIRE(tandem_cli({"train", "--data", data_file("digits.csv.gz"), "--epochs", "3", "--backend", "reference",
                      "--save", model}) == 0);
  REQUIRE(tandem_cli({"predict", "--model", model, "--data", data_file("digits.csv.gz"), "--backend", "reference",
                      "--json", out}) == 0);
  const nlohmann::json doc = read_json(out);
  CHECK(doc["kind"] == "mlp");
  CHECK(doc["rows"] == 1797);
  CHECK(doc["classes"].size() == 1797);
  CHECK(doc["accuracy"].get<double>() > 0.8);
  // The same accuracy as the library computes on the standardised data.
  ml::Mlp loaded = ml::Mlp::load(get_backend("reference"), model);
  data::Dataset d = data::read_csv(data_file("digits.csv.gz"), {.label_column = -1});
  loaded.standardizer.apply(d);
  CHECK(doc["accuracy"].get<double>() == doctest::Approx(ml::evaluate(loaded, d).accuracy).epsilon(1e-12));
  // An accuracy target the model misses exits 1.
  CHECK(tandem_cli({"predict", "--model", model, "--data", data_file("digits.csv.gz"), "--backend", "reference",
                    "--min-accuracy", "0.9999"}) == 1);
}

TEST_CASE("a file name that is not UTF-8 reaches --json escaped, losing neither the result nor a byte") {
  // train --json threw nlohmann's type_error.316 after training (exit 4, no JSON).
  const std::string data = scratch("n\xff\xfe.csv.gz"), out = scratch("utf8.json");
  fs::copy_file(data_file("digits.csv.gz"), data, fs::copy_options::overwrite_existing);
  REQUIRE(tandem_cli({"train", "--data", data, "--epochs", "1", "--backend", "reference", "--json", out}) == 0);
  const nlohmann::json doc = read_json(out);
  const std::string written = doc["data"].get<std::string>();
  CHECK(written.ends_with("n\\xFF\\xFE.csv.gz"));
  CHECK(cli::utf8_or_escaped("a\\b") == "a\\b");                  // UTF-8: as it is
  CHECK(cli::utf8_or_escaped("a\\b\xff") == "a\\\\b\\xFF");    // else backslashes doubled, bytes as \xHH
  CHECK(cli::utf8_or_escaped("\xc3\xa9\xed\xa0\x80") == "\xc3\xa9\\xED\\xA0\\x80");  // é kept; a surrogate is not UTF-8
}

TEST_CASE("--save naming an input file is refused before the work, and the input survives") {
  // train --data X --save X overwrote the data set with the model and exited 0.
  const std::string data = scratch("own.csv.gz");
  fs::copy_file(data_file("digits.csv.gz"), data, fs::copy_options::overwrite_existing);
  const auto before = fs::file_size(data);
  CHECK(tandem_cli({"train", "--data", data, "--epochs", "1", "--save", data}) == cli::kDataError);
  CHECK(tandem_cli({"train", "--data", data, "--epochs", "1", "--save", scratch("./own.csv.gz")}) == cli::kDataError);
  CHECK(tandem_cli({"regress", "--data", data_file("diabetes_data_raw.csv.gz"), "--target", data, "--save", data}) ==
        cli::kDataError);
  CHECK(fs::file_size(data) == before);
}

TEST_CASE("an unwritable --save path stops train before it trains, as a file error") {
  CHECK(tandem_cli({"train", "--data", data_file("digits.csv.gz"), "--save", fs::temp_directory_path().string()}) ==
        cli::kDataError);
  CHECK(tandem_cli({"train", "--data", data_file("digits.csv.gz"), "--save", "/nonexistent/dir/m.model"}) ==
        cli::kDataError);
}
#endif

TEST_CASE("exit codes: 2 for usage, 3 for data and files") {
  CHECK(tandem_cli({"train", "--data", "/nonexistent/tandem.csv"}) == cli::kDataError);
  CHECK(tandem_cli({"predict", "--model", "/nonexistent/m.model", "--data", "x.csv"}) == cli::kDataError);
  CHECK(tandem_cli({"check", "--fast"}) == cli::kUsage);
  CHECK(tandem_cli({"check", "--seed", "-1"}) == cli::kUsage);  // once read as 2^64-1
  CHECK(tandem_cli({"train", "--data", "x.csv", "--backend", "openmp", "--backend", "reference"}) == cli::kUsage);
  CHECK(tandem_cli({"train", "--data", "x.csv", "--epochs", "0"}) == cli::kUsage);
  CHECK(tandem_cli({"regress", "--data", "x.csv"}) == cli::kUsage);  // no target given
  CHECK(tandem_cli({"bench", "--algorithm", "fft"}) == cli::kUsage);
  CHECK(tandem_cli({"nonsense"}) == cli::kUsage);
  CHECK(tandem_cli({"--help"}) == cli::kOk);
  CHECK(tandem_cli({"info", "--json", scratch("info.json")}) == cli::kOk);
  CHECK(read_json(scratch("info.json"))["backends"].size() == backend_names().size());
}

TEST_CASE("a TANDEM_* value tandem does not know is a usage error, with the allowed values") {
  ::setenv("TANDEM_CPU_ISA", "avx3", 1);
  CHECK(tandem_cli({"info"}) == cli::kUsage);
  CHECK_THROWS_WITH_AS(check_environment(), doctest::Contains("generic, avx2, avx512 or amx"), InvalidArgument);
  ::unsetenv("TANDEM_CPU_ISA");
  ::setenv("TANDEM_DEBUG_MEMORY", "yes", 1);
  CHECK_THROWS_WITH_AS(check_environment(), doctest::Contains("use 1 (on) or 0 (off)"), InvalidArgument);
  ::unsetenv("TANDEM_DEBUG_MEMORY");
  for (const char* bad : {"1,2", "1,2,3,4", "0,256,3072", "120,,3072", "120,256,99999", "120;256;3072"}) {
    CAPTURE(bad);
    ::setenv("TANDEM_OPENMP_GEMM_BLOCKING", bad, 1);
    CHECK_THROWS_WITH_AS(check_environment(), doctest::Contains("use 3 whole numbers from 1 to 16384"),
                         InvalidArgument);
  }
  ::setenv("TANDEM_OPENMP_GEMM_BLOCKING", "120,256,3072", 1);
  CHECK(env::whole_list("TANDEM_OPENMP_GEMM_BLOCKING", 3, 1, 16384) == std::vector<std::uint64_t>{120, 256, 3072});
  ::unsetenv("TANDEM_OPENMP_GEMM_BLOCKING");
  ::setenv("TANDEM_NOT_A_VARIABLE", "1", 1);
  const auto unknown = check_environment();
  CHECK(std::find(unknown.begin(), unknown.end(), "TANDEM_NOT_A_VARIABLE") != unknown.end());
  ::unsetenv("TANDEM_NOT_A_VARIABLE");
}

TEST_CASE("check --junit: a testsuite per backend, a testcase per case, as many as --json lists") {
  const std::string json = scratch("check.json"), xml = scratch("check.xml");
  REQUIRE(tandem_cli({"check", "--backend", "reference", "--backend", "openmp", "--quick", "--family", "reduce",
                      "--failures-only", "--json", json, "--junit", xml}) == 0);
  const nlohmann::json doc = read_json(json);
  const std::string report = slurp(xml);
  const std::size_t cases = doc["cases"].size();
  CHECK(cases > 10);
  CHECK(doc["failed"] == 0);
  CHECK(count_of(report, "<testcase ") == cases);
  CHECK(count_of(report, "<testsuite ") == 2);
  CHECK(count_of(report, "<failure") == 0);
  CHECK(report.find("tests=\"" + std::to_string(cases) + "\" failures=\"0\"") != std::string::npos);
  // The seed is a string in the JSON (a 64-bit number would be rounded by jq and JavaScript), the
  // same digits as the JUnit property.
  REQUIRE(doc["seed"].is_string());
  CHECK(report.find("<property name=\"seed\" value=\"" + doc["seed"].get<std::string>() + "\"") != std::string::npos);
}

TEST_CASE("bench/compare: numbers are noise when the machine was loaded or the repeats spread") {
  std::vector<cli::sweep::Result> rows(8);
  for (auto& r : rows) {
    r.kernel.reps = 10;
    r.kernel.min_ms = 1.0;
    r.kernel.median_ms = 1.1;
  }
  CHECK_FALSE(cli::sweep::assess_noise(rows, 0.2, 2).noisy);
  CHECK(cli::sweep::assess_noise(rows, 1.9, 2).noisy);  // load 1.9 on 2 CPUs
  CHECK(cli::sweep::assess_noise(rows, 1.9, 2).why.find("load average") != std::string::npos);
  rows[0].kernel.median_ms = rows[1].kernel.median_ms = 1.6;  // 2 of 8: a quarter, not more
  CHECK_FALSE(cli::sweep::assess_noise(rows, 0.2, 2).noisy);
  rows[2].kernel.median_ms = 1.6;  // 3 of 8
  const auto n = cli::sweep::assess_noise(rows, 0.2, 2);
  CHECK(n.noisy);
  CHECK(n.spread_rows == 3);
  rows[3].kernel.min_ms = 0.001;  // microsecond kernels jitter by nature and are not counted
  rows[3].kernel.median_ms = 0.01;
  CHECK(cli::sweep::assess_noise(rows, 0.2, 2).timed_rows == 7);
}
