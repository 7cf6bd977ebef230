// The page watch of sim_plain.hpp: read-only pages, a SIGSEGV handler that twins and opens a page
// on its first write, and the comparison with the twins after each fiber.
#include "sim_plain.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>

namespace tandem::sim::internal {
namespace {

std::atomic<PageWatch*> g_armed{nullptr};  // the one armed watch of the process
std::mutex g_arming;  // held while a watch is armed or stopped, and by forget()
// The handler before ours, while a watch is armed: faults that are not ours go there. Ours is
// installed for each watch and the previous one put back after it, as a test framework replaces
// handlers between its test cases.
struct sigaction g_previous {};

}  // namespace

std::size_t PageWatch::page_size() {
  static const std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

void PageWatch::on_fault(int sig, siginfo_t* info, void* context) {
  PageWatch* w = g_armed.load(std::memory_order_acquire);
  std::size_t page = 0;
  if (w != nullptr && w->page_of(info->si_addr, page)) {
    w->fault(page);
    return;  // the write runs again, on an open page
  }
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if ((g_previous.sa_flags & SA_SIGINFO) == 0 && g_previous.sa_handler != SIG_DFL &&
      g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  signal(sig, SIG_DFL);  // a real fault: the instruction runs again and ends the process as it would have
}

bool PageWatch::page_of(const void* a, std::size_t& page) const {
  const auto* p = static_cast<const unsigned char*>(a);
  const auto it = std::upper_bound(spans_.begin(), spans_.end(), p,
                                   [](const unsigned char* q, const Span& s) { return q < s.begin; });
  if (it == spans_.begin()) return false;
  const std::size_t s = static_cast<std::size_t>(it - spans_.begin()) - 1;
  if (p >= spans_[s].begin + spans_[s].bytes) return false;
  page = first_[s] + static_cast<std::size_t>(p - spans_[s].begin) / page_size();
  return true;
}

unsigned char* PageWatch::address(std::size_t page) const {
  const std::size_t s = static_cast<std::size_t>(std::upper_bound(first_.begin(), first_.end(), page) - first_.begin()) - 1;
  return spans_[s].begin + (page - first_[s]) * page_size();
}

// In the signal handler: no allocation (dirty_ has room for every page), no lock.
void PageWatch::fault(std::size_t page) {
  unsigned char* p = address(page);
  if (pthread_equal(pthread_self(), owner_) != 0) {
    if (state_[page].load(std::memory_order_relaxed) == armed_page) {
      std::memcpy(twin(page), p, page_size());
      state_[page].store(dirty_page, std::memory_order_relaxed);
      dirty_.push_back(page);
    }
  } else {
    // Another thread writes a buffer this launch does not use (a copy, a free): the page is left
    // open and no longer watched. (A page a fiber already made dirty is open, so another thread's
    // write there is not seen and would be taken for the fiber's; a program that writes a
    // launch's own buffers from another thread during the launch has a race anyway.)
    state_[page].store(open_page, std::memory_order_relaxed);
  }
  mprotect(p, page_size(), PROT_READ | PROT_WRITE);
}

bool PageWatch::start(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  spans_ = std::move(spans);
  first_.clear();
  pages_ = 0;
  for (const Span& s : spans_) {
    first_.push_back(pages_);
    pages_ += s.bytes / page_size();
  }
  if (pages_ == 0) return false;
  void* twins = mmap(nullptr, pages_ * page_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (twins == MAP_FAILED) return false;
  twins_ = static_cast<unsigned char*>(twins);
  state_ = std::make_unique<std::atomic<unsigned char>[]>(pages_);
  dirty_.clear();
  dirty_.reserve(pages_);
  released_ = std::make_unique<std::atomic<bool>[]>(spans_.size());
  owner_ = pthread_self();
  const std::lock_guard lock(g_arming);
  if (g_armed.load() != nullptr) {
    munmap(twins_, pages_ * page_size());
    twins_ = nullptr;
    return false;
  }
  g_armed.store(this, std::memory_order_release);
  struct sigaction action {};
  action.sa_sigaction = &PageWatch::on_fault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;  // on the alternate stack where one is set (sanitizers set one)
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &g_previous);
  armed_ = true;
  for (const Span& s : spans_) {
    if (mprotect(s.begin, s.bytes, PROT_READ) != 0) {
      for (const Span& o : spans_) mprotect(o.begin, o.bytes, PROT_READ | PROT_WRITE);
      sigaction(SIGSEGV, &g_previous, nullptr);
      g_armed.store(nullptr, std::memory_order_release);
      munmap(twins_, pages_ * page_size());
      twins_ = nullptr;
      armed_ = false;
      return false;
    }
  }
  return true;
}

void PageWatch::forget(const void* begin) noexcept {
  const std::lock_guard lock(g_arming);
  PageWatch* w = g_armed.load(std::memory_order_acquire);
  if (w == nullptr) return;
  const auto it = std::lower_bound(w->spans_.begin(), w->spans_.end(), begin,
                                   [](const Span& s, const void* b) { return s.begin < b; });
  if (it == w->spans_.end() || it->begin != begin) return;
  const std::size_t s = static_cast<std::size_t>(it - w->spans_.begin());
  if (!w->released_[s].exchange(true)) mprotect(it->begin, it->bytes, PROT_READ | PROT_WRITE);
}

void PageWatch::collect(std::vector<Chunk>& out) {
  const std::size_t size = page_size();
  for (const std::size_t page : dirty_) {
    if (state_[page].load(std::memory_order_relaxed) != dirty_page) continue;  // opened by another thread
    unsigned char* p = address(page);
    const unsigned char* t = twin(page);
    for (std::size_t off = 0; off < size; off += 8) {
      std::uint64_t now = 0, old = 0;
      std::memcpy(&now, p + off, 8);
      std::memcpy(&old, t + off, 8);
      if (now == old) continue;
      unsigned char mask = 0;
      for (unsigned i = 0; i < 8; ++i) {
        if (((now ^ old) >> (8 * i) & 0xFF) != 0) mask = static_cast<unsigned char>(mask | (1u << i));
      }
      out.push_back({reinterpret_cast<std::uintptr_t>(p + off), mask, old});
    }
    state_[page].store(armed_page, std::memory_order_relaxed);
    const std::size_t span =
        static_cast<std::size_t>(std::upper_bound(first_.begin(), first_.end(), page) - first_.begin()) - 1;
    if (!released_[span].load()) mprotect(p, size, PROT_READ);
  }
  dirty_.clear();
}

void PageWatch::settle(const void* p, std::size_t bytes) {
  const auto* a = static_cast<const unsigned char*>(p);
  for (std::size_t done = 0; done < bytes;) {
    std::size_t page = 0;
    const auto at = reinterpret_cast<std::uintptr_t>(a + done);
    const std::size_t in_page = std::min(bytes - done, page_size() - at % page_size());
    if (page_of(a + done, page) && state_[page].load(std::memory_order_relaxed) == dirty_page) {
      std::memcpy(twin(page) + at % page_size(), a + done, in_page);
    }
    done += in_page;
  }
}

void PageWatch::stop() noexcept {
  if (!armed_) return;
  const std::lock_guard lock(g_arming);
  for (std::size_t i = 0; i < spans_.size(); ++i) {
    if (!released_[i].load()) mprotect(spans_[i].begin, spans_[i].bytes, PROT_READ | PROT_WRITE);
  }
  sigaction(SIGSEGV, &g_previous, nullptr);
  g_armed.store(nullptr, std::memory_order_release);
  munmap(twins_, pages_ * page_size());
  twins_ = nullptr;
  armed_ = false;
  dirty_.clear();
}

}  // namespace tandem::sim::internal

// ---- PlainStores ----

namespace tandem::sim::internal {
namespace {
std::uint64_t byte_mask(unsigned char mask) {
  std::uint64_t m = 0;
  for (unsigned i = 0; i < 8; ++i) {
    if ((mask >> i & 1u) != 0) m |= std::uint64_t(0xFF) << (8 * i);
  }
  return m;
}
std::uint64_t merge(std::uint64_t into, std::uint64_t from, unsigned char mask) {
  const std::uint64_t m = byte_mask(mask);
  return (into & ~m) | (from & m);
}
}  // namespace

void PlainStores::put(std::uintptr_t addr, unsigned char mask, std::uint64_t bits) {
  auto* p = reinterpret_cast<unsigned char*>(addr);
  std::uint64_t m = 0;
  std::memcpy(&m, p, 8);
  m = merge(m, bits, mask);
  std::memcpy(p, &m, 8);  // may fault on an armed page: twinned like a kernel's write,
  watch_.settle(p, 8);    // and the twin takes it, as it is not a store of the next fiber
}

void PlainStores::set_shown(std::uintptr_t addr, Store& s, bool shown) {
  if (s.shown == shown) return;
  put(addr, s.mask, shown ? s.now : s.old);
  s.shown = shown;
}

void PlainStores::show(const Thread& t) {
  if (!active() || (chunks_.empty() && shown_.empty())) {
    view_ = t;
    return;
  }
  if (t.first == view_.first && !block_view_stale_) {
    // Same block: hide the last thread's own stores its block was not shown.
    if (const auto prev = by_thread_.find(view_); prev != by_thread_.end() && view_ != t) {
      for (const std::uintptr_t addr : prev->second) {
        const auto c = chunks_.find(addr);
        if (c == chunks_.end()) continue;
        for (Store& s : c->second) {
          if (s.thread == view_ && !s.block_visible) set_shown(addr, s, false);
        }
      }
    }
  } else {
    for (const std::uintptr_t addr : shown_) {
      const auto c = chunks_.find(addr);
      if (c == chunks_.end()) continue;
      for (Store& s : c->second) {
        if (s.thread != t) set_shown(addr, s, false);
      }
    }
    shown_.clear();
    for (auto o = by_thread_.lower_bound({t.first, 0}); o != by_thread_.end() && o->first.first == t.first; ++o) {
      for (const std::uintptr_t addr : o->second) {
        const auto c = chunks_.find(addr);
        if (c == chunks_.end()) continue;
        for (Store& s : c->second) {
          if (s.thread == o->first && s.block_visible && !s.shown) {
            set_shown(addr, s, true);
            shown_.push_back(addr);
          }
        }
      }
    }
    block_view_stale_ = false;
  }
  if (const auto own = by_thread_.find(t); own != by_thread_.end()) {
    for (const std::uintptr_t addr : own->second) {
      const auto c = chunks_.find(addr);
      if (c == chunks_.end()) continue;
      for (Store& s : c->second) {
        if (s.thread == t) {  // listed even when already shown: the next switch must hide it
          set_shown(addr, s, true);
          shown_.push_back(addr);
        }
      }
    }
  }
  view_ = t;
}

void PlainStores::record(const Thread& t, const PageWatch::Chunk& c) {
  auto& stores = chunks_[c.addr];
  std::uint64_t now = 0;
  std::memcpy(&now, reinterpret_cast<const void*>(c.addr), 8);
  std::uint64_t old = c.old;
  // Its store supersedes other threads' stores under the same bytes; where it saw them, the
  // bytes before its store are the bytes before theirs.
  for (Store& s : stores) {
    const auto over = static_cast<unsigned char>(s.mask & c.mask);
    if (s.thread == t || over == 0) continue;
    if (s.shown) old = merge(old, s.old, over);
    s.mask = static_cast<unsigned char>(s.mask & ~over);
  }
  std::erase_if(stores, [&](const Store& s) { return s.mask == 0 && s.thread != t; });
  auto own = std::find_if(stores.begin(), stores.end(), [&](const Store& s) { return s.thread == t; });
  if (own != stores.end() && own->block_visible) {
    // Written again after its block was shown the store: the block must not see its bytes go
    // back to what was there before. It becomes visible to all (earlier than a GPU need show it:
    // a bug missed, never a good kernel flagged), and this write is a new store over it (its
    // old bytes, from the twin, are the first store's).
    stores.erase(own);
    own = stores.end();
  }
  if (own == stores.end()) {
    stores.push_back({t, c.mask, old, now, false, true});
    auto& mine = by_thread_[t];
    if (mine.empty()) threads_.push_back(t);
    mine.push_back(c.addr);
  } else {
    // Written again (its block not shown it yet): the bytes it had not written keep what was
    // there before.
    own->old = merge(own->old, old, static_cast<unsigned char>(c.mask & ~own->mask));
    own->mask = static_cast<unsigned char>(own->mask | c.mask);
    own->now = now;
    own->shown = true;
  }
  shown_.push_back(c.addr);
}

void PlainStores::ran(const Thread& t) {
  if (!active()) return;
  written_.clear();
  watch_.collect(written_);
  for (const PageWatch::Chunk& c : written_) record(t, c);
}

template <class Which>
void PlainStores::publish_if(const std::vector<std::uintptr_t>& chunks, Which which) {
  for (const std::uintptr_t addr : chunks) {
    const auto c = chunks_.find(addr);
    if (c == chunks_.end()) continue;
    for (Store& s : c->second) {
      if (which(s)) set_shown(addr, s, true);
    }
    std::erase_if(c->second, which);
    if (c->second.empty()) chunks_.erase(c);
  }
}

void PlainStores::publish(const Thread& t) {
  if (!active() || chunks_.empty()) return;
  if (const auto own = by_thread_.find(t); own != by_thread_.end()) {
    publish_if(own->second, [&](const Store& s) { return s.thread == t; });
    by_thread_.erase(own);
  }
  for (auto o = by_thread_.lower_bound({t.first, 0}); o != by_thread_.end() && o->first.first == t.first; ++o) {
    const Thread other = o->first;
    publish_if(o->second, [&](const Store& s) { return s.thread == other && s.block_visible; });
  }
}

void PlainStores::publish_some(std::uint64_t pick) {
  while (!threads_.empty()) {
    const std::size_t i = pick % threads_.size();
    const Thread t = threads_[i];
    threads_[i] = threads_.back();
    threads_.pop_back();
    const auto own = by_thread_.find(t);
    if (own == by_thread_.end()) continue;  // published since
    publish_if(own->second, [&](const Store& s) { return s.thread == t; });
    by_thread_.erase(own);
    return;
  }
}

void PlainStores::show_to_block(std::uint64_t block, const unsigned* rank) {
  if (!active() || chunks_.empty()) return;
  for (auto o = by_thread_.lower_bound({block, rank != nullptr ? *rank : 0u});
       o != by_thread_.end() && o->first.first == block && (rank == nullptr || o->first.second == *rank); ++o) {
    for (const std::uintptr_t addr : o->second) {
      const auto c = chunks_.find(addr);
      if (c == chunks_.end()) continue;
      for (Store& s : c->second) {
        if (s.thread == o->first) s.block_visible = true;
      }
    }
  }
  if (block == view_.first) block_view_stale_ = true;
}

void PlainStores::supersede(const void* p, std::size_t bytes) {
  if (!active() || chunks_.empty()) return;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  for (std::uintptr_t addr = at & ~std::uintptr_t(7); addr < at + bytes; addr += 8) {
    const auto c = chunks_.find(addr);
    if (c == chunks_.end()) continue;
    unsigned char mask = 0;
    for (unsigned i = 0; i < 8; ++i) {
      if (addr + i >= at && addr + i < at + bytes) mask = static_cast<unsigned char>(mask | (1u << i));
    }
    for (Store& s : c->second) {
      if ((s.mask & mask) == 0) continue;
      set_shown(addr, s, true);  // the newest bytes, for the write (an atomic reads them) and its versions
      shown_.push_back(addr);
      s.mask = static_cast<unsigned char>(s.mask & ~mask);
    }
    std::erase_if(c->second, [](const Store& s) { return s.mask == 0; });
    if (c->second.empty()) chunks_.erase(c);
  }
}

void PlainStores::wrote(const void* p, std::size_t bytes) {
  if (active()) watch_.settle(p, bytes);
}

void PlainStores::finish() noexcept {
  if (active()) {
    for (auto& [addr, stores] : chunks_) {
      for (Store& s : stores) set_shown(addr, s, true);
    }
  }
  chunks_.clear();
  by_thread_.clear();
  threads_.clear();
  shown_.clear();
  view_ = {~std::uint64_t(0), 0};
  block_view_stale_ = true;
  watch_.stop();
}

}  // namespace tandem::sim::internal
