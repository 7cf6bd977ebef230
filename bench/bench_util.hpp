// What the benchmarks share: the median of repeated timings after a warm-up.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace tandem::bench {

// Seconds per call of f: the median of `reps` timed calls after one untimed warm-up call
// (page faults, caches, thread pools).
inline double median_seconds(int reps, const std::function<void()>& f) {
  f();
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The options every benchmark takes: --quick (fewer, smaller runs) and --json FILE.
struct Options {
  bool quick = false;
  std::string json_path;
};
// Parses them; returns -1 to go on, else the exit code (0 after --help, 2 for a bad option),
// having printed `usage` to stderr.
inline int parse_options(int argc, char** argv, const char* usage, Options& o) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      o.json_path = argv[++i];
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      o.quick = true;
    } else {
      std::fputs(usage, stderr);
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  return -1;
}

}  // namespace tandem::bench
