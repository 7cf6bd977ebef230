// `tandem bench bandwidth` and `tandem bench memory` (levels.cpp); their options are registered
// with bench's in bench.cpp.
#pragma once

#include <string>

#include "json.hpp"

namespace tandem::cli {

struct LevelArgs {
  std::string backend, plot;
  bool full = false;
  JsonOption json;
};

int bench_bandwidth(const LevelArgs& a);
int bench_memory(const LevelArgs& a);

}  // namespace tandem::cli
