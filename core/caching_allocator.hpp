// The caching allocator every backend's buffers come from, built once on the device contract
// (Backend::device_allocate, device_free, device_free_bytes). Internal: the public header only
// names it, so its mutex and maps are no part of the API.
//
// Blocks are rounded up (512 B, 1 MiB from 16 MiB) and kept for reuse when freed; a request is
// served by the best cached block no more than twice its size, else by the device, and when the
// device has not enough, the cache is given back and the device asked once more (never during a
// real graph capture: freeing device memory waits for the device, which would invalidate it).
// Statistics, scopes (peak inside a scope) and, with TANDEM_DEBUG_MEMORY=1, where each live
// block was allocated.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <source_location>
#include <string>
#include <unordered_map>
#include <vector>

#include "tandem/memory.hpp"

namespace tandem {
class Backend;
}

namespace tandem::detail {

class CachingAllocator {
 public:
  // device: the backend whose device contract serves the blocks; it owns this allocator.
  explicit CachingAllocator(Backend& device);
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  void* allocate(std::size_t bytes, const std::source_location& where);
  void deallocate(void* ptr) noexcept;
  MemoryStats stats() const;
  void empty_cache();
  std::vector<LiveAllocation> live() const;
  bool tracks() const { return track_; }
  // Reports leaks (when tracking) and gives the cache back; blocks freed after this go straight
  // to the device. Idempotent. Run while the backend's device state is alive (detail::Owned).
  void shut_down() noexcept;

  // Scopes: open returns a slot whose peak is tracked until it is closed.
  int open_scope();
  void close_scope(int slot);
  std::size_t scope_peak(int slot) const;

 private:
  void give_back_cache();  // with the lock held

  Backend& device_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> cache_;         // free blocks kept for reuse, by size
  std::unordered_map<void*, LiveAllocation> live_;  // every live block (where: when tracking)
  MemoryStats stats_;
  std::vector<std::size_t> scope_base_, scope_peak_;  // per scope slot
  std::vector<bool> scope_open_;
  bool track_ = false;
  bool shut_down_ = false;
};

}  // namespace tandem::detail
