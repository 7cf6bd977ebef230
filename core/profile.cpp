// The op-level profile: records in memory, written as a Chrome trace (JSON) at stop() or exit.
#include "tandem/profile.hpp"

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>

#include "tandem/errors.hpp"

namespace tandem::profile {
namespace {

using Clock = std::chrono::steady_clock;

struct State {
  std::mutex mutex;
  std::atomic<bool> on{false};
  std::string path;
  std::vector<Record> records;
  Clock::time_point t0 = Clock::now();
  bool exit_hook = false;
};

State& state();

void write_at_exit() {
  try {
    (void)stop();
  } catch (const std::exception& e) {  // nothing can be thrown at exit: said, as the last word
    std::fprintf(stderr, "tandem: %s\n", e.what());
  }
}

State& state() {
  // From the environment at first use.
  static State* s = [] {
    auto* st = new State;  // never destroyed: ops may run from other static destructors
    const char* env = std::getenv("TANDEM_PROFILE");
    if (env != nullptr && env[0] != '\0') {
      st->path = env;
      st->on = true;
      st->exit_hook = true;
      std::atexit(write_at_exit);
    }
    return st;
  }();
  return *s;
}

double now_us(const State& s) { return std::chrono::duration<double, std::micro>(Clock::now() - s.t0).count(); }

std::string json_escape(const std::string& in) {
  std::string out;
  for (char c : in) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) >= 0x20) {
      out += c;
    }
  }
  return out;
}

}  // namespace

bool enabled() { return state().on.load(std::memory_order_relaxed); }

void start(const std::string& path) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.path = path;
  s.records.clear();
  s.t0 = Clock::now();
  if (!s.exit_hook) {
    s.exit_hook = true;
    std::atexit(write_at_exit);
  }
  s.on = true;
}

std::vector<Record> records() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.records;
}

std::size_t stop() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.on) return 0;
  s.on = false;
  std::FILE* f = std::fopen(s.path.c_str(), "w");
  if (f == nullptr) {
    throw IoError(s.path + ": cannot write the profile there (" + std::strerror(errno) + "; TANDEM_PROFILE)");
  }
  // One trace process per backend, one thread per queue; the memory in use as a counter track.
  std::map<std::string, int> pid;
  for (const Record& r : s.records) pid.emplace(r.backend, static_cast<int>(pid.size()) + 1);
  std::fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
  bool first = true;
  auto sep = [&] {
    std::fputs(first ? "  " : ",\n  ", f);
    first = false;
  };
  for (const auto& [name, id] : pid) {
    sep();
    std::fprintf(f, "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"args\": {\"name\": \"tandem %s\"}}", id,
                 json_escape(name).c_str());
  }
  for (const Record& r : s.records) {
    const int p = pid[r.backend];
    sep();
    std::fprintf(f,
                 "{\"ph\": \"X\", \"name\": \"%s\", \"cat\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, "
                 "\"dur\": %.3f, \"args\": {\"detail\": \"%s\", \"bytes\": %zu, \"flops\": %.0f, \"memory_in_use\": %zu}}",
                 json_escape(r.name).c_str(), json_escape(r.backend).c_str(), p, r.queue, r.start_us, r.duration_us,
                 json_escape(r.detail).c_str(), r.bytes, r.flops, r.memory_in_use);
    sep();
    std::fprintf(f, "{\"ph\": \"C\", \"name\": \"memory in use\", \"pid\": %d, \"ts\": %.3f, \"args\": {\"bytes\": %zu}}",
                 p, r.start_us + r.duration_us, r.memory_in_use);
  }
  std::fprintf(f, "\n]}\n");
  const bool ok = std::ferror(f) == 0;
  if (std::fclose(f) != 0 || !ok) throw IoError(s.path + ": writing the profile failed (TANDEM_PROFILE)");
  return s.records.size();
}

OpTimer::OpTimer(Backend& backend, Queue q, const char* name) : backend_(backend), q_(q), name_(name) {
  if (!enabled()) return;
  on_ = true;
  exceptions_ = std::uncaught_exceptions();
  host_start_us_ = now_us(state());
  start_ = backend_.record_event(q_);
}

void OpTimer::set(std::string detail, std::size_t bytes, double flops) {
  detail_ = std::move(detail);
  bytes_ = bytes;
  flops_ = flops;
}

OpTimer::~OpTimer() {
  if (!on_ || std::uncaught_exceptions() > exceptions_) return;  // the op failed: nothing to time
  try {
    const Event stop_event = backend_.record_event(q_);
    Record r;
    r.duration_us = 1000 * backend_.elapsed_ms(start_, stop_event);
    r.backend = backend_.name();
    r.name = name_;
    r.detail = std::move(detail_);
    r.queue = q_.id;
    r.bytes = bytes_;
    r.flops = flops_;
    r.start_us = host_start_us_;
    r.memory_in_use = backend_.memory_stats().bytes_in_use;
    State& s = state();
    std::lock_guard lock(s.mutex);
    if (s.on) s.records.push_back(std::move(r));
  } catch (...) {
    // the queue's error surfaces at its next use; a profile must not turn it into a crash
  }
}

}  // namespace tandem::profile
