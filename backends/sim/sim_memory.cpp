// The simulator's global memory: every buffer between guard zones of a known byte, checked after
// each kernel, so that a write outside a buffer is reported with the kernel and how far it went
// (a GPU would corrupt its neighbour silently). The caching allocator's rounding is guarded too:
// set_requested moves the end guard down to the bytes the caller asked for. Every buffer owns its
// pages, so that the adversary can watch them for plain stores (sim_plain.hpp).
#include <cstdlib>
#include <cstring>
#include <string>

#include "sim_engine.hpp"
#include "sim_plain.hpp"
#include "tandem/errors.hpp"

namespace tandem::sim {
namespace {
constexpr std::size_t kGuardBytes = 1024;  // before and after every global buffer
constexpr unsigned char kGuardByte = 0xCD;

// The pages a buffer of `bytes` takes with its guard zones.
std::size_t span_bytes(std::size_t bytes) {
  const std::size_t page = internal::PageWatch::page_size();
  return (bytes + 2 * kGuardBytes + page - 1) / page * page;
}
}  // namespace

void* SimEngine::allocate(std::size_t bytes) {
  auto* raw = static_cast<unsigned char*>(std::aligned_alloc(internal::PageWatch::page_size(), span_bytes(bytes)));
  if (raw == nullptr) return nullptr;
  std::memset(raw, kGuardByte, kGuardBytes);
  std::memset(raw + kGuardBytes + bytes, kGuardByte, kGuardBytes);
  unsigned char* ptr = raw + kGuardBytes;
  std::lock_guard lock(memory_mutex_);
  allocations_[ptr] = {bytes, bytes};
  return ptr;
}

void SimEngine::release(void* ptr) noexcept {
  auto* p = static_cast<unsigned char*>(ptr);
  internal::PageWatch::forget(p - kGuardBytes);  // an adversarial launch may be watching its pages
  {
    std::lock_guard lock(memory_mutex_);
    allocations_.erase(p);
  }
  std::free(p - kGuardBytes);
}

void SimEngine::release_all() noexcept {
  std::lock_guard lock(memory_mutex_);
  for (auto& [ptr, a] : allocations_) std::free(ptr - kGuardBytes);
  allocations_.clear();
}

void SimEngine::set_requested(void* ptr, std::size_t requested) noexcept {
  auto* p = static_cast<unsigned char*>(ptr);
  std::lock_guard lock(memory_mutex_);
  auto it = allocations_.find(p);
  if (it == allocations_.end() || requested > it->second.block) return;
  it->second.requested = requested;
  std::memset(p + requested, kGuardByte, it->second.block - requested);
}

std::vector<internal::Span> SimEngine::buffer_spans() {
  std::lock_guard lock(memory_mutex_);
  std::vector<internal::Span> spans;
  spans.reserve(allocations_.size());
  for (const auto& [p, a] : allocations_) spans.push_back({p - kGuardBytes, span_bytes(a.block)});
  return spans;
}

void SimEngine::check_guards(const char* kernel) {
  std::lock_guard lock(memory_mutex_);
  for (auto& [p, a] : allocations_) {
    const unsigned char* lo = p - kGuardBytes;
    const unsigned char* hi_end = p + a.block + kGuardBytes;
    std::ptrdiff_t bad = 0;
    bool found = false;
    for (const unsigned char* q = lo; q < p; ++q) {
      if (*q != kGuardByte) {
        bad = q - p;
        found = true;
        break;
      }
    }
    if (!found) {
      for (const unsigned char* q = hi_end; q-- > p + a.requested;) {  // the far end first: how far it went
        if (*q != kGuardByte) {
          bad = q - p;
          found = true;
          break;
        }
      }
    }
    if (!found) continue;
    std::memset(p - kGuardBytes, kGuardByte, kGuardBytes);
    std::memset(p + a.requested, kGuardByte, a.block - a.requested + kGuardBytes);
    const std::string where =
        bad < 0 ? std::to_string(-bad) + " bytes before its start"
                : std::to_string(bad - static_cast<std::ptrdiff_t>(a.requested) + 1) + " bytes past its end";
    throw DeviceError("simulator: kernel '" + std::string(kernel) + "' wrote outside a buffer of " +
                      std::to_string(a.requested) + " bytes: byte offset " + std::to_string(bad) + ", " + where +
                      " (guard zone overwritten)");
  }
}
}  // namespace tandem::sim
