// Option checks and JSON output shared by the subcommands.
#include "options.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "sweep.hpp"
#include "tandem/errors.hpp"

namespace tandem::cli {
namespace {

// Digits only, without overflow; false otherwise.
bool parse_whole(const std::string& text, std::uint64_t& n) {
  if (text.empty() || text.size() > 20) return false;
  n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (n > (UINT64_MAX - digit) / 10) return false;
    n = n * 10 + digit;
  }
  return true;
}

std::string bound_text(std::uint64_t x) {
  if (x == std::uint64_t(1) << 53) return "2^53";
  if (x == UINT64_MAX) return "2^64-1";
  return std::to_string(x);
}

}  // namespace

CLI::Validator whole_number(std::uint64_t min, std::uint64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        std::uint64_t n = 0;
        if (parse_whole(text, n) && n >= min && n <= max) return {};
        return "'" + text + "' is not a whole number from " + bound_text(min) + " to " + bound_text(max);
      },
      "");
}

CLI::Validator real_number(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double x = std::strtod(text.c_str(), &end);
        if (!text.empty() && *end == '\0' && errno == 0 && std::isfinite(x) && x >= min && x <= max) return {};
        char range[64];
        std::snprintf(range, sizeof range, "[%g, %g]", min, max);
        return "'" + text + "' is not a number in " + range;
      },
      "");
}

std::vector<std::size_t> parse_widths(const std::string& text) {
  std::vector<std::size_t> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    std::uint64_t n = 0;
    if (!parse_whole(text.substr(start, comma - start), n) || n == 0 || n > (std::uint64_t(1) << 31)) {
      throw InvalidArgument("'" + text + "' is not a comma-separated list of widths from 1 to 2^31, e.g. 64,128,10");
    }
    out.push_back(static_cast<std::size_t>(n));
    start = comma + 1;
  }
  return out;
}

CLI::Validator width_list() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          parse_widths(text);
          return {};
        } catch (const InvalidArgument& e) {
          return e.what();
        }
      },
      "");
}

void DataArgs::add(CLI::App* app, const std::string& label_column_help) {
  app->add_option("--data", data, "CSV (gzip or not), or MNIST IDX images with --labels FILE")
      ->required()
      ->type_name("FILE");
  app->add_option("--labels", labels, "the IDX labels that go with IDX images in --data")->type_name("FILE");
  app->add_option("--label-column", label_column, label_column_help)->type_name("C")->capture_default_str();
  app->add_option("--delimiter", delimiter, "field separator (default: detected; 'tab' for tabs)")
      ->type_name("C")
      ->check(CLI::Validator(
          [](std::string& d) -> std::string {
            return d.size() == 1 || d == "tab" ? std::string() : "takes one character (or 'tab')";
          },
          ""));
  app->add_option("--header", header, "whether the first row names the columns")
      ->check(CLI::IsMember({"yes", "no", "detect"}))
      ->capture_default_str();
}

data::Dataset DataArgs::load() const {
  if (!labels.empty()) return data::read_idx(data, labels);
  data::CsvOptions o;
  o.label_column = data::parse_label_column(label_column);
  o.delimiter = delimiter.empty() ? '\0' : delimiter == "tab" ? '\t' : delimiter[0];
  o.header = header == "yes"  ? data::CsvOptions::Header::yes
             : header == "no" ? data::CsvOptions::Header::no
                              : data::CsvOptions::Header::detect;
  return data::read_csv(data, o);
}

void check_writable(const std::string& path, std::initializer_list<std::string> inputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw IoError(path + ": is a directory; give a file name to write");
  for (const std::string& input : inputs) {
    std::error_code e1, e2;
    const bool same = !input.empty() && (fs::equivalent(path, input, e1) ||
                                         fs::weakly_canonical(path, e1) == fs::weakly_canonical(input, e2));
    if (same) throw IoError(path + ": is an input of this command (" + input + "); writing it would destroy it");
  }
  const fs::path parent = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec)) throw IoError(path + ": the folder " + parent.string() + " does not exist");
  if (access(parent.c_str(), W_OK) != 0) {
    throw IoError(path + ": cannot write in " + parent.string() + " (" + std::strerror(errno) + ")");
  }
}

namespace {

struct Output {
  const CLI::App* app;
  CLI::Option* option;
  bool folder;
};
std::vector<Output>& outputs() {
  static std::vector<Output> all;
  return all;
}

}  // namespace

void forget_outputs() { outputs().clear(); }

void output_file(CLI::App* app, CLI::Option* option) { outputs().push_back({app, option, false}); }
void output_folder(CLI::App* app, CLI::Option* option) { outputs().push_back({app, option, true}); }

void check_outputs(const CLI::App* app) {
  for (const Output& o : outputs()) {
    if (o.app != app || o.option->count() == 0) continue;
    const std::string value = o.option->results().empty() ? std::string() : o.option->results().front();
    const std::string name = o.option->get_name(false, true);
    try {
      if (o.folder) {
        sweep::plot_check(value);
      } else if (!value.empty() && value != "-") {
        check_writable(value);
      }
    } catch (const IoError& e) {
      throw IoError(name + ": " + e.what());
    }
  }
}

void JsonOption::add(CLI::App* app, const std::string& what) {
  option_ = app->add_option("--json", path_, what + " as JSON, to FILE or (- or no FILE) to standard output")
                ->expected(0, 1)
                ->type_name("[FILE]");
  output_file(app, option_);
}

bool JsonOption::wanted() const { return option_ != nullptr && option_->count() > 0; }
bool JsonOption::to_stdout() const { return wanted() && (path_.empty() || path_ == "-"); }

void JsonOption::write(const Json& doc) const {
  if (!wanted()) return;
  write_text(to_stdout() ? "-" : path_, json_text(doc));
}

}  // namespace tandem::cli
