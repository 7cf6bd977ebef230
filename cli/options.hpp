// What every subcommand shares: checked option values on CLI11, `--json [FILE]` written with
// nlohmann/json (numbers round-trip exact), and the command table main() runs.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tandem/data.hpp"
#include "tandem/device.hpp"

namespace tandem::cli {

using Json = nlohmann::ordered_json;  // keys in the order written

// A subcommand: its CLI11 app (options bound to the command's state) and what runs once parsed.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// Whole numbers written in decimal digits only (no sign, no exponent), from min to max.
CLI::Validator whole_number(std::uint64_t min, std::uint64_t max = std::uint64_t(1) << 53);
// A finite number in [min, max].
CLI::Validator real_number(double min, double max);
// A comma-separated list of whole numbers >= 1, e.g. 64,128,10.
CLI::Validator width_list();
std::vector<std::size_t> parse_widths(const std::string& text);

// `--json [FILE]`: JSON to FILE, or to standard output when FILE is - or left out (the human
// output then stays off standard output).
class JsonOption {
 public:
  void add(CLI::App* app, const std::string& what);
  bool wanted() const { return option_ != nullptr && option_->count() > 0; }
  bool to_stdout() const { return wanted() && (path_.empty() || path_ == "-"); }
  // Writes doc (IoError when the file cannot be written). Does nothing when --json was not given.
  void write(const Json& doc) const;

 private:
  CLI::Option* option_ = nullptr;
  std::string path_;
};

// Where a data set comes from, as train and predict take it: --data, --labels, --label-column,
// --delimiter, --header.
struct DataArgs {
  std::string data, labels, label_column = "last", delimiter, header = "detect";
  void add(CLI::App* app, const std::string& label_column_help);
  data::Dataset load() const;
};

// Throws IoError now when path cannot be written later (a directory, or a folder not writable),
// so that no work is lost to a bad --save path.
void check_writable(const std::string& path);

// Writes text to path ("-": standard output); IoError when it cannot.
void write_text(const std::string& path, const std::string& text);

// A number for JSON: NaN and Inf, which JSON lacks, become null.
Json number(double x);
const char* kind_name(BackendKind k);
std::string today();

// The subcommands (each in its own file).
Command add_info(CLI::App& app);
Command add_check(CLI::App& app);
Command add_train(CLI::App& app);
Command add_predict(CLI::App& app);
Command add_regress(CLI::App& app);
std::vector<Command> add_bench(CLI::App& app);     // bench, bench bandwidth, bench memory
std::vector<Command> add_levels(CLI::App* bench);  // bench bandwidth, bench memory
Command add_compare(CLI::App& app);

}  // namespace tandem::cli
