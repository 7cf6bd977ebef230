// The adversary's view of plain C++ stores to global memory. Kernel code writes through raw
// pointers, which the simulator cannot intercept; the pages of its buffers can be made read-only
// instead. The first write to an armed page faults: the handler keeps a copy of the page (its
// twin), opens the page and lets the write through. Under the adversary one fiber runs at a time
// on one OS thread, so after a fiber is switched out the bytes that differ from the twins of the
// pages it dirtied are exactly its plain stores since it was switched in; the pages are armed
// again for the next fiber.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <csignal>
#include <pthread.h>

namespace tandem::sim::internal {

// A page-aligned range of the simulator's global memory: a buffer with its guard zones.
struct Span {
  unsigned char* begin;
  std::size_t bytes;
};

class PageWatch {
 public:
  // Eight bytes (aligned) of which a fiber changed those in `mask` (bit i: byte i); `old` holds
  // what they were before.
  struct Chunk {
    std::uintptr_t addr;
    unsigned char mask;
    std::uint64_t old;
  };

  PageWatch() = default;
  PageWatch(const PageWatch&) = delete;
  PageWatch& operator=(const PageWatch&) = delete;
  ~PageWatch() { stop(); }

  static std::size_t page_size();
  // Arms the pages of `spans` against writes, for this OS thread. False, arming nothing, when
  // another thread's watch is armed (one at a time per process) or the pages cannot be protected.
  bool start(std::vector<Span> spans);
  bool armed() const { return armed_; }
  // Appends the chunks written since the last call (by the one fiber that ran) and arms their
  // pages again.
  void collect(std::vector<Chunk>& out);
  // A write the simulator made itself (a flag store made visible, an atomic): it is not a plain
  // store, so the twin takes it too.
  void settle(const void* p, std::size_t bytes);
  // Opens every page again.
  void stop() noexcept;

 private:
  enum Page : unsigned char { armed_page, dirty_page, open_page };
  static void on_fault(int sig, siginfo_t* info, void* context);
  // True and the page's index when a is in a watched page.
  bool page_of(const void* a, std::size_t& page) const;
  unsigned char* address(std::size_t page) const;
  unsigned char* twin(std::size_t page) const { return twins_ + page * page_size(); }
  void fault(std::size_t page);

  std::vector<Span> spans_;         // sorted by address
  std::vector<std::size_t> first_;  // the index of each span's first page
  std::size_t pages_ = 0;
  std::unique_ptr<std::atomic<unsigned char>[]> state_;
  std::vector<std::size_t> dirty_;  // pages made dirty since the last collect (capacity: every page)
  unsigned char* twins_ = nullptr;  // one twin per page, mapped on demand (untouched ones cost nothing)
  pthread_t owner_{};
  bool armed_ = false;
};

}  // namespace tandem::sim::internal
