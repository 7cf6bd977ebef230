// Op-level profile: with TANDEM_PROFILE=trace.json in the environment (or profile::start), every
// op records its backend, name, shapes, bytes moved, duration and the memory in use, and the run
// is written as a Chrome / Perfetto trace (open it at ui.perfetto.dev or chrome://tracing) when the
// program exits or profile::stop() is called.
//
// Durations are device-timed with events on GPU backends. Profiling waits for each op to finish
// before the next is queued, so a profiled run shows where time goes op by op, not how queues
// overlap; without TANDEM_PROFILE none of this costs anything.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tandem/backend.hpp"

namespace tandem::profile {

struct Record {
  std::string backend;
  std::string name;    // the op: "matmul", "upload", "adam_step", ...
  std::string detail;  // shapes, dtype, tier or variant
  int queue = 0;
  std::size_t bytes = 0;        // operand bytes read and written
  double flops = 0;             // floating-point operations (matmul), else 0
  double start_us = 0;          // host time since profiling began
  double duration_us = 0;       // device-timed on GPUs
  std::size_t memory_in_use = 0;  // the backend's allocator, after the op
};

// Whether ops are being recorded.
bool enabled();
// Starts recording (clearing earlier records); the trace goes to `path` at stop() or at exit.
void start(const std::string& path);
// Writes the trace and stops recording; returns the number of ops written. No-op when not recording.
// IoError when the file cannot be written (recording stops either way; at exit the error is printed).
std::size_t stop();
// The ops recorded so far.
std::vector<Record> records();

// Times one op on a backend when profiling is on; does nothing otherwise. Create it just before
// queuing the op, give it details if on(), let it go out of scope after.
class OpTimer {
 public:
  OpTimer(Backend& backend, Queue q, const char* name);
  ~OpTimer();
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;
  bool on() const { return on_; }
  void set(std::string detail, std::size_t bytes, double flops = 0);

 private:
  Backend& backend_;
  Queue q_;
  const char* name_;
  bool on_ = false;
  int exceptions_ = 0;
  double host_start_us_ = 0;
  Event start_;
  std::string detail_;
  std::size_t bytes_ = 0;
  double flops_ = 0;
};

}  // namespace tandem::profile
