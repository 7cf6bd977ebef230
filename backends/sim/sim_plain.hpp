// The adversary's model of plain C++ stores to global memory. Kernel code writes through raw
// pointers, which the simulator cannot intercept; the pages of its buffers can be made read-only
// instead (PageWatch). The first write to an armed page faults: the handler keeps a copy of the
// page (its twin), opens the page and lets the write through. Under the adversary one fiber runs
// at a time on one OS thread, so after a fiber is switched out the bytes that differ from the
// twins of the pages it dirtied are exactly its plain stores since it was switched in; the pages
// are armed again for the next fiber.
//
// PlainStores keeps those stores in a per-thread store buffer, as the flag stores are kept: a
// store is hidden from other threads until its thread makes it visible. Since plain loads cannot
// be intercepted either, the buffer acts on memory itself: before a fiber runs, memory shows what
// that thread may see (its own hidden stores and those shown to its block over what is visible to
// all, the other hidden stores' bytes as they were before them), so its plain loads and flag loads
// alike read the older bytes of stores not yet visible to it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
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
  // The buffer whose span begins at `begin` is being freed (by any thread): its pages are opened
  // now and left alone, as the memory may be unmapped or reused before the watch stops.
  static void forget(const void* begin) noexcept;

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
  std::unique_ptr<std::atomic<bool>[]> released_;  // per span: freed while watched
  std::vector<std::size_t> dirty_;  // pages made dirty since the last collect (capacity: every page)
  unsigned char* twins_ = nullptr;  // one twin per page, mapped on demand (untouched ones cost nothing)
  pthread_t owner_{};
  bool armed_ = false;
};

// The plain stores of a launch not yet visible to every thread, by thread (block, rank).
class PlainStores {
 public:
  using Thread = std::pair<std::uint64_t, unsigned>;  // the block's linear index, the thread's rank

  // Arms the watch on these pages (false: another launch's watch holds them; nothing is modelled).
  bool start(std::vector<Span> spans) { return watch_.start(std::move(spans)); }
  bool active() const { return watch_.armed(); }
  // Before thread t runs: memory shows what t may see.
  void show(const Thread& t);
  // After thread t ran: its plain stores since show(t) join its hidden stores.
  void ran(const Thread& t);
  // A device or system fence or a release store of t: its hidden stores, and those shown to its
  // block (t may have seen them: cumulativity), become visible to all.
  void publish(const Thread& t);
  // A random delay elapsed: the stores of one thread (chosen by `pick`) become visible.
  void publish_some(std::uint64_t pick);
  // A block fence of thread `rank` of `block`, or a barrier of the block (rank null): their hidden
  // stores become visible to the block.
  void show_to_block(std::uint64_t block, const unsigned* rank);
  // The simulator is about to write [p, p + bytes) itself (a flag store made visible, an atomic):
  // the plain stores there become visible first (the write reads or versions what was there) and
  // are superseded. wrote() after the write: not a plain store of the next fiber.
  void supersede(const void* p, std::size_t bytes);
  void wrote(const void* p, std::size_t bytes);
  // The launch ends (or failed): every store visible, the pages open.
  void finish() noexcept;

 private:
  struct Store {
    Thread thread;
    unsigned char mask;  // the bytes of the chunk it wrote; hidden stores of a chunk are disjoint
    std::uint64_t old;   // those bytes before it
    std::uint64_t now;   // those bytes as it wrote them
    bool block_visible;
    bool shown;  // memory holds `now` (else `old`)
  };
  // Writes `bits` under `mask` into the chunk at `addr`.
  void put(std::uintptr_t addr, unsigned char mask, std::uint64_t bits);
  void set_shown(std::uintptr_t addr, Store& s, bool shown);
  // Makes every store of `chunks` that `which` selects visible to all.
  template <class Which>
  void publish_if(const std::vector<std::uintptr_t>& chunks, Which which);
  void record(const Thread& t, const PageWatch::Chunk& c);

  PageWatch watch_;
  std::unordered_map<std::uintptr_t, std::vector<Store>> chunks_;  // hidden stores by chunk address
  std::map<Thread, std::vector<std::uintptr_t>> by_thread_;        // the chunks each thread wrote
  std::vector<Thread> threads_;         // threads that may have hidden stores (for publish_some)
  std::vector<std::uintptr_t> shown_;  // chunks that may hold a shown store of another view
  Thread view_{~std::uint64_t(0), 0};  // whose view memory shows
  bool block_view_stale_ = true;       // a store of the view's block was shown to it since
  std::vector<PageWatch::Chunk> written_;
};

}  // namespace tandem::sim::internal
