// JSON output shared by the commands and the measurement engine, without CLI11 (which costs
// about 10 s of compile time in each file that includes it): nlohmann/json, numbers written so
// that they read back bit for bit; `--json [FILE]` as an option object.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tandem/device.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace tandem::cli {

using Json = nlohmann::ordered_json;  // keys in the order written

// `--json [FILE]`: JSON to FILE, or to standard output when FILE is - or left out (the human
// output then stays off standard output).
class JsonOption {
 public:
  void add(CLI::App* app, const std::string& what);
  bool wanted() const;
  bool to_stdout() const;
  // Writes doc (IoError when the file cannot be written). Does nothing when --json was not given.
  void write(const Json& doc) const;

 private:
  CLI::Option* option_ = nullptr;
  std::string path_;
};

// Writes text to path ("-": standard output); IoError when it cannot.
void write_text(const std::string& path, const std::string& text);

// doc as JSON text. JSON strings are UTF-8; a string that is not (a file name with other bytes)
// is written with each byte outside a UTF-8 character as \xHH and each backslash doubled, so that
// nothing is lost (nlohmann/json threw, and the finished result with it).
std::string json_text(const Json& doc);
// That escape of one string: itself when it is UTF-8.
std::string utf8_or_escaped(const std::string& s);

// A number for JSON: NaN and Inf, which JSON lacks, become null.
Json number(double x);
std::string today();

}  // namespace tandem::cli
