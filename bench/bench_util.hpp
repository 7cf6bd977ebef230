// What the benchmarks share: the median of repeated timings after a warm-up.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
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

}  // namespace tandem::bench
