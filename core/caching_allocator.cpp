// The caching allocator (see caching_allocator.hpp).
#include "caching_allocator.hpp"

#include <cstdio>
#include <cstdlib>
#include <limits>

#include "tandem/backend.hpp"
#include "tandem/environment.hpp"
#include "tandem/errors.hpp"

namespace tandem::detail {

namespace {

// Blocks are rounded up so that freed blocks can serve slightly different requests.
constexpr std::size_t kSmallGranule = 512;
constexpr std::size_t kLargeGranule = 1 << 20;
constexpr std::size_t kLargeThreshold = 16 << 20;

std::size_t round_block(std::size_t bytes) {
  const std::size_t granule = bytes >= kLargeThreshold ? kLargeGranule : kSmallGranule;
  if (bytes > std::numeric_limits<std::size_t>::max() - granule) return 0;  // overflow: caller throws
  return (bytes + granule - 1) / granule * granule;
}

bool debug_memory_enabled() { return env::flag("TANDEM_DEBUG_MEMORY"); }

}  // namespace

CachingAllocator::CachingAllocator(Backend& device) : device_(device), track_(debug_memory_enabled()) {}

void* CachingAllocator::allocate(std::size_t bytes, const std::source_location& where) {
  if (bytes == 0) return nullptr;
  const std::size_t block = round_block(bytes);
  if (block == 0) throw OutOfMemory(bytes, device_.device_free_bytes(), device_.name());
  std::lock_guard lock(mutex_);
  void* ptr = nullptr;
  // Best fit among cached blocks no more than twice the size asked.
  auto it = cache_.lower_bound(block);
  std::size_t got = block;
  if (it != cache_.end() && it->first <= 2 * block) {
    ptr = it->second;
    got = it->first;
    cache_.erase(it);
    ++stats_.cache_hits;
  } else {
    ptr = device_.device_allocate(block);
    if (ptr == nullptr && !cache_.empty() && !device_.capturing()) {  // give the cache back and try once more
      give_back_cache();
      ptr = device_.device_allocate(block);
    }
    if (ptr == nullptr) throw OutOfMemory(bytes, device_.device_free_bytes(), device_.name());
    stats_.bytes_reserved += block;
  }
  LiveAllocation record;
  record.bytes = got;
  if (track_) {
    record.file = where.file_name();
    record.line = where.line();
    record.function = where.function_name();
  }
  live_.emplace(ptr, std::move(record));
  ++stats_.allocations;
  stats_.bytes_in_use += got;
  if (stats_.bytes_in_use > stats_.peak_bytes_in_use) stats_.peak_bytes_in_use = stats_.bytes_in_use;
  for (std::size_t s = 0; s < scope_open_.size(); ++s) {
    if (scope_open_[s] && stats_.bytes_in_use > scope_peak_[s]) scope_peak_[s] = stats_.bytes_in_use;
  }
  device_.on_allocate(ptr, bytes, got);
  return ptr;
}

void CachingAllocator::deallocate(void* ptr) noexcept {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;  // not ours: ignore rather than corrupt the cache
  const std::size_t bytes = it->second.bytes;
  live_.erase(it);
  stats_.bytes_in_use -= bytes;
  if (shut_down_) {
    device_.device_free(ptr, bytes);
    stats_.bytes_reserved -= bytes;
  } else {
    cache_.emplace(bytes, ptr);
  }
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CachingAllocator::give_back_cache() {
  for (auto& [size, ptr] : cache_) {
    device_.device_free(ptr, size);
    stats_.bytes_reserved -= size;
  }
  cache_.clear();
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  give_back_cache();
}

std::vector<LiveAllocation> CachingAllocator::live() const {
  std::lock_guard lock(mutex_);
  std::vector<LiveAllocation> result;
  result.reserve(live_.size());
  for (const auto& [ptr, record] : live_) result.push_back(record);
  return result;
}

void CachingAllocator::shut_down() noexcept {
  try {
    if (track_) {
      const std::string report = device_.leak_report();
      if (!report.empty()) std::fputs(report.c_str(), stderr);
    }
    std::lock_guard lock(mutex_);
    give_back_cache();
    shut_down_ = true;
  } catch (...) {
    // Shutting down must not throw; a failed report is not worth terminating for.
  }
}

int CachingAllocator::open_scope() {
  std::lock_guard lock(mutex_);
  int slot = -1;
  for (std::size_t s = 0; s < scope_open_.size(); ++s) {
    if (!scope_open_[s]) {
      slot = static_cast<int>(s);
      break;
    }
  }
  if (slot < 0) {
    slot = static_cast<int>(scope_open_.size());
    scope_open_.push_back(false);
    scope_base_.push_back(0);
    scope_peak_.push_back(0);
  }
  scope_open_[slot] = true;
  scope_base_[slot] = stats_.bytes_in_use;
  scope_peak_[slot] = stats_.bytes_in_use;
  return slot;
}

void CachingAllocator::close_scope(int slot) {
  std::lock_guard lock(mutex_);
  scope_open_[slot] = false;
}

std::size_t CachingAllocator::scope_peak(int slot) const {
  std::lock_guard lock(mutex_);
  return scope_peak_[slot] - scope_base_[slot];
}

}  // namespace tandem::detail
