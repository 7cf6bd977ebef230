// Small helpers shared by the subcommands: option values with checked conversions, JSON text.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tandem/device.hpp"
#include "tandem/errors.hpp"

namespace tandem::cli {

// Walks the arguments of one subcommand; value() takes the next one as the current flag's value.
class Args {
 public:
  explicit Args(const std::vector<std::string>& args) : args_(args) {}
  bool next() { return ++i_ < args_.size(); }
  const std::string& flag() const { return args_[i_]; }
  std::string value() {
    if (i_ + 1 >= args_.size()) throw InvalidArgument(args_[i_] + " needs a value");
    return args_[++i_];
  }
  std::size_t count(std::size_t min = 1) {
    const std::string f = flag(), v = value();
    const std::size_t n = whole(v);
    if (n == kBad || n < min || n > kLargest) {
      throw InvalidArgument(f + " '" + v + "' is not a whole number from " + std::to_string(min) + " to 2^53");
    }
    return n;
  }
  double real(double min, double max) {
    const std::string f = flag(), v = value();
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || !std::isfinite(x) || x < min || x > max) {
      throw InvalidArgument(f + " '" + v + "' is not a number in [" + trim(min) + ", " + trim(max) + "]");
    }
    return x;
  }
  std::vector<std::size_t> counts() {
    const std::string f = flag(), v = value();
    std::vector<std::size_t> out;
    std::size_t start = 0;
    while (start <= v.size()) {
      const std::size_t comma = std::min(v.find(',', start), v.size());
      const std::size_t n = whole(v.substr(start, comma - start));
      if (n == kBad || n == 0 || n > kLargest) {
        throw InvalidArgument(f + " '" + v + "' is not a comma-separated list of widths >= 1, e.g. 64,128,10");
      }
      out.push_back(n);
      start = comma + 1;
    }
    return out;
  }

 private:
  static constexpr std::size_t kBad = static_cast<std::size_t>(-1), kLargest = std::size_t(1) << 53;
  // Digits only (no sign, no blanks), without overflow; kBad otherwise.
  static std::size_t whole(const std::string& v) {
    if (v.empty() || v.size() > 19) return kBad;
    std::size_t n = 0;
    for (char c : v) {
      if (c < '0' || c > '9') return kBad;
      n = n * 10 + static_cast<std::size_t>(c - '0');
    }
    return n;
  }
  static std::string trim(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", x);
    return buf;
  }
  const std::vector<std::string>& args_;
  std::size_t i_ = static_cast<std::size_t>(-1);
};

inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Writes text to path ("-": standard output); InvalidArgument when it cannot.
inline void write_text(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fputs(text.c_str(), stdout);
    return;
  }
  std::ofstream f(path);
  f << text;
  if (!f) throw InvalidArgument("cannot write " + path);
}

inline const char* kind_name(BackendKind k) {
  switch (k) {
    case BackendKind::cpu: return "cpu";
    case BackendKind::gpu: return "gpu";
    case BackendKind::simulator: return "simulator";
  }
  return "?";
}

// A number as JSON (NaN and Inf, which JSON lacks, become null).
inline std::string json_number(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", x);
  return buf;
}

}  // namespace tandem::cli
