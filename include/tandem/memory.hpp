// Memory statistics of a backend's caching allocator, and a scope that reports the peak used in it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tandem {

class Backend;

struct MemoryStats {
  std::size_t bytes_in_use = 0;     // held by live buffers (rounded to the allocator's block size)
  std::size_t peak_bytes_in_use = 0;
  std::size_t bytes_reserved = 0;   // obtained from the device: in use + cached for reuse
  std::uint64_t allocations = 0;    // allocate calls served
  std::uint64_t cache_hits = 0;     // of those, served from the cache without a device allocation
};

// One buffer still alive, with where it was allocated (for the leak report).
struct LiveAllocation {
  std::size_t bytes = 0;
  std::string file;
  std::uint32_t line = 0;
  std::string function;
};

// Reports the peak bytes in use on a backend between its construction and peak_bytes(), above
// what was in use when it began. Scopes nest.
class MemoryScope {
 public:
  explicit MemoryScope(Backend& backend);
  ~MemoryScope();
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;
  std::size_t peak_bytes() const;

 private:
  Backend& backend_;
  int slot_;
};

}  // namespace tandem
