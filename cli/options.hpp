// What every subcommand shares: checked option values on CLI11, the data-set options, and the
// command table main() runs (JSON output: json.hpp).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "json.hpp"
#include "tandem/data.hpp"

namespace tandem::cli {

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

// Where a data set comes from, as train and predict take it: --data, --labels, --label-column,
// --delimiter, --header.
struct DataArgs {
  std::string data, labels, label_column = "last", delimiter, header = "detect";
  void add(CLI::App* app, const std::string& label_column_help);
  data::Dataset load() const;
};

// Throws IoError now when path cannot be written later (a directory, or a folder not writable),
// so that no work is lost to a bad --save path, or when it is one of the command's inputs
// (writing it would destroy the data: --save equal to --data).
void check_writable(const std::string& path, std::initializer_list<std::string> inputs = {});
// Marks an option of `app` as an output: a FILE ("-" or no value: standard output) or a folder of
// plots (sweep::plot_check). check_outputs(app), run once the options are read and before the
// command's work, checks each one given, so that a command whose output cannot be written fails
// (IoError: exit 3) before it computes anything.
void output_file(CLI::App* app, CLI::Option* option);
void output_folder(CLI::App* app, CLI::Option* option);
void check_outputs(const CLI::App* app);
// Forgets the outputs marked so far: each run of the command line marks its own.
void forget_outputs();

// The subcommands (each in its own file).
Command add_info(CLI::App& app);
Command add_check(CLI::App& app);
Command add_train(CLI::App& app);
Command add_predict(CLI::App& app);
Command add_regress(CLI::App& app);
std::vector<Command> add_bench(CLI::App& app);  // bench, bench bandwidth, bench memory
Command add_compare(CLI::App& app);

}  // namespace tandem::cli
