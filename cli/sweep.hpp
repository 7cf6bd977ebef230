// The measurement engine behind `tandem bench` and `tandem compare`: each algorithm on each
// backend (and tier or variant) at log-spaced sizes, timed kernel-only (events, median of repeats
// after a warm-up) and end to end (host data in, host result out, from pageable and from pinned
// memory, chunked with copies overlapping compute on two queues, and through managed memory),
// with the limit measured in the same run beside it: the backend's own copy bandwidth
// for memory-bound ops, its vendor BLAS for matmul where it has one.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "json.hpp"

namespace tandem {
class Backend;
}

namespace tandem::cli::sweep {

struct Options {
  bool full = false;                    // the whole size range (default: a quick subset)
  bool variants = false;                // every tier and variant (bench), or the default only (compare)
  std::vector<std::string> backends;    // empty: every available one except reference and the simulators
  std::vector<std::string> algorithms;  // empty: all of them
  double min_seconds = 0.02;            // per kernel timing: repeat until this much time has passed
  bool flush = true;                    // evict the operands before each kernel run where they fit the caches
  // Progress on standard error whenever 2 s pass without a line: what is being measured, how
  // many results are in. Empty: none.
  std::string progress_label;
};

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int reps = 0;
};

struct Result {
  std::string algorithm, backend, kind, variant;  // kind: cpu, gpu, simulator
  std::size_t size = 0;                           // elements (vector ops) or N (matmul N x N x N)
  double bytes = 0;                               // memory the kernel must move, read + written
  double flops = 0;                               // floating-point operations (matmul)
  Timing kernel;
  bool flushed = false;                           // the operands were evicted before each kernel run
  double e2e_pageable_ms = 0, e2e_pinned_ms = 0;  // host in, host out
  // Pinned, in chunks on two queues so copies overlap compute (add, axpy, sum, dot from 64 Ki
  // elements), and through managed memory where the runtime has it; 0 where not measured.
  double e2e_overlap_ms = 0, e2e_managed_ms = 0;
  double limit_gbps = 0;     // the backend's copy bandwidth at this size
  double vendor_gflops = 0;  // matmul: the vendor tier at this size (0: none)
  double gbps() const { return bytes / (kernel.median_ms * 1e6); }
  double gflops() const { return flops / (kernel.median_ms * 1e6); }
  // The fastest way end to end among those measured.
  double best_e2e_ms() const {
    double best = std::min(e2e_pageable_ms, e2e_pinned_ms);
    if (e2e_overlap_ms > 0) best = std::min(best, e2e_overlap_ms);
    if (e2e_managed_ms > 0) best = std::min(best, e2e_managed_ms);
    return best;
  }
};

// Runs work on the backend for a quarter second before anything is measured.
void warm_up(Backend& backend);

// The algorithms swept: add, axpy, sum, dot, scan, matmul.
const std::vector<std::string>& algorithm_names();
// Runs the sweep; `progress` is told each result as it is measured.
std::vector<Result> run(const Options& options, const std::function<void(const Result&)>& progress = {});

Json json(const std::vector<Result>& results, const std::string& command);
std::string csv(const std::vector<Result>& results);

// Whether the numbers can be trusted: noisy when the machine was busy before the run (1-minute
// load average above 3/4 of the logical CPUs) or when, in more than a quarter of the results
// timed 3 times or more at 0.05 ms or longer, the median kernel time is more than 50% above the
// fastest run.
struct Noise {
  bool noisy = false;
  double load_average = 0;  // before the run
  int cpus = 0;
  std::size_t spread_rows = 0, timed_rows = 0;  // rows with median > 1.5 x min, of the rows counted
  std::string why;                              // empty when not noisy
};
double load_average();  // 1-minute; 0 where the OS does not say
Noise assess_noise(const std::vector<Result>& results, double load_before, int cpus);

// Writes the JSON into dir as `file` and runs bench/plot.py on it with /usr/bin/python3 (Debian's
// python3-matplotlib), as an argument vector (no shell); InvalidArgument saying what to install
// when it cannot, IoError when dir cannot be written.
void plot_json(const Json& doc, const std::string& dir, const std::string& file);
// What plot_json needs, checked before any work: dir a folder that exists or can be created and
// written, the script and matplotlib there (IoError or InvalidArgument as plot_json throws).
void plot_check(const std::string& dir);
inline void plot(const std::vector<Result>& results, const std::string& dir, const std::string& command) {
  plot_json(json(results, command), dir, "results.json");
}

}  // namespace tandem::cli::sweep
