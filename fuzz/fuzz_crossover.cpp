// libFuzzer target: the crossover file (TANDEM_CROSSOVER, read by crossover_for and backend_for)
// with the input as its contents. A tandem::Error or a crossover is the only outcome; a named
// backend must be one the line gave, and backend_for must return a backend that runs here.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tandem/errors.hpp"
#include "tandem/registry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  using namespace tandem;
  static const std::string path = "/tmp/tandem-fuzz-crossover-" + std::to_string(::getpid()) + ".txt";
  static const bool set = (::setenv("TANDEM_CROSSOVER", path.c_str(), 1), true);
  (void)set;
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(bytes, 1, size, f);
    std::fclose(f);
  }
  try {
    for (const char* algorithm : {"add", "matmul", "scan"}) {
      const Crossover x = crossover_for(algorithm);
      if (!x.backend.empty() && x.backend.find_first_of(" \t\n#") != std::string::npos) __builtin_trap();
      Backend& be = backend_for(algorithm, x.from);
      if (be.name().empty()) __builtin_trap();
    }
  } catch (const tandem::Error&) {
  }
  return 0;
}
