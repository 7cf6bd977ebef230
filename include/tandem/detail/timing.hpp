// The one median timer of the CLI and the benchmarks: repeat a timed sample until enough time and
// runs have passed, and report the median (and the spread) of the samples.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

namespace tandem::detail {

struct Samples {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int reps = 0;
};

// Milliseconds that f() takes on the host clock.
template <class F>
double host_ms(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Calls sample() (which runs the work once and returns its milliseconds) until the samples add up
// to min_total_ms and number at least min_reps, or number max_reps. The caller warms up first.
template <class Sample>
Samples repeat_median(Sample&& sample, int min_reps, int max_reps, double min_total_ms) {
  std::vector<double> ms;
  double total = 0;
  while ((total < min_total_ms || static_cast<int>(ms.size()) < min_reps) && static_cast<int>(ms.size()) < max_reps) {
    ms.push_back(sample());
    total += ms.back();
  }
  Samples s;
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  s.median_ms = ms[ms.size() / 2];
  s.min_ms = ms.front();
  s.max_ms = ms.back();
  s.reps = static_cast<int>(ms.size());
  return s;
}

}  // namespace tandem::detail
