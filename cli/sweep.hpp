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
  bool flush = true;                    // evict the caches before each kernel run whose data fits in them
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
  bool flushed = false;                           // the caches were evicted before each kernel run
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

std::string json(const std::vector<Result>& results, const std::string& command);
std::string csv(const std::vector<Result>& results);

// Writes results.json into dir and runs bench/plot.py on it (Debian's python3-matplotlib);
// throws InvalidArgument saying what to install when it cannot.
void plot(const std::vector<Result>& results, const std::string& dir, const std::string& command);
// The same for any JSON plot.py knows (bench, compare, bench bandwidth, bench memory).
void plot_json(const std::string& text, const std::string& dir, const std::string& file);

}  // namespace tandem::cli::sweep
