// The JSON helpers of json.hpp that need no CLI11: shared by the commands and by the
// measurement engine, which the Python package links without the rest of the CLI.
#include "json.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>

#include "tandem/errors.hpp"

namespace tandem::cli {

void write_text(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    return;
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw IoError(path + ": cannot write (" + std::strerror(errno) + ")");
  f << text;
  f.close();
  if (!f) throw IoError(path + ": writing failed (disk full?)");
}

Json number(double x) { return std::isfinite(x) ? Json(x) : Json(nullptr); }

const char* kind_name(BackendKind k) {
  switch (k) {
    case BackendKind::cpu:
      return "cpu";
    case BackendKind::gpu:
      return "gpu";
    case BackendKind::simulator:
      return "simulator";
  }
  return "?";
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::localtime(&now));
  return date;
}

}  // namespace tandem::cli
