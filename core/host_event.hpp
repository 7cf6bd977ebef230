// The event of a queue whose work is done by the time it is recorded (the CPU backends and the
// simulator run ops as they are queued): the host clock at that moment.
#pragma once

#include <chrono>
#include <string>

#include "tandem/backend.hpp"
#include "tandem/errors.hpp"

namespace tandem::detail {

struct HostEvent : Event::Impl {
  std::chrono::steady_clock::time_point time = std::chrono::steady_clock::now();
};

// The host event behind e; InvalidArgument naming `what` when e is empty or another backend's.
inline const HostEvent& host_event(const Event::Impl* e, const char* what) {
  const auto* h = dynamic_cast<const HostEvent*>(e);
  if (h == nullptr) {
    throw InvalidArgument(std::string(what) + ": the event was not recorded on this backend (use its record_event)");
  }
  return *h;
}

inline double host_elapsed_ms(const Event::Impl* start, const Event::Impl* stop) {
  return std::chrono::duration<double, std::milli>(host_event(stop, "elapsed_ms").time -
                                                   host_event(start, "elapsed_ms").time)
      .count();
}

}  // namespace tandem::detail
