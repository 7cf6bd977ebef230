// A per-case watchdog for runs that must never wait forever (tandem check, the test programs): a
// case that runs past its limit is named on standard error and the process ends with `exit_code`,
// instead of hanging until an outer timeout kills it without a word. A GPU kernel that waits for
// a block or a store that never comes cannot be interrupted from the host, so ending the process
// is the only way out; that is why this lives in the programs, never in the library.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "tandem/environment.hpp"

namespace tandem::cli {

class CaseWatchdog {
 public:
  // limit_seconds 0: no watch. `who` starts the message ("tandem check").
  CaseWatchdog(double limit_seconds, std::string who, int exit_code)
      : limit_(limit_seconds), who_(std::move(who)), exit_code_(exit_code) {
    if (limit_ > 0) thread_ = std::thread([this] { watch(); });
  }
  ~CaseWatchdog() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  CaseWatchdog(const CaseWatchdog&) = delete;
  CaseWatchdog& operator=(const CaseWatchdog&) = delete;

  // A case begins (replacing the one before) or ends.
  void start(std::string name) {
    std::lock_guard lock(mutex_);
    name_ = std::move(name);
    since_ = std::chrono::steady_clock::now();
    running_ = true;
  }
  void stop() {
    std::lock_guard lock(mutex_);
    running_ = false;
  }

  // TANDEM_CASE_TIMEOUT (seconds, 0: none), else `fallback`.
  static double limit_from_environment(double fallback) {
    return static_cast<double>(env::whole("TANDEM_CASE_TIMEOUT", 0, 86400).value_or(static_cast<std::uint64_t>(fallback)));
  }

 private:
  void watch() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::milliseconds(250));
      if (!running_) continue;
      const double ran = std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count();
      if (ran <= limit_) continue;
      std::fflush(stdout);
      std::fprintf(stderr,
                   "%s: HUNG: case '%s' has run for %.1f s, past its limit of %.1f s (TANDEM_CASE_TIMEOUT; "
                   "--case-timeout for tandem check): a kernel that waits on another block or a flag that never "
                   "comes does not return. Ending the run with exit code %d.\n",
                   who_.c_str(), name_.c_str(), ran, limit_, exit_code_);
      std::fflush(stderr);
      std::_Exit(exit_code_);
    }
  }

  double limit_;
  std::string who_;
  int exit_code_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread thread_;
  std::string name_;
  std::chrono::steady_clock::time_point since_;
  bool running_ = false;
  bool stopping_ = false;
};

}  // namespace tandem::cli
