// The page watch of sim_plain.hpp: read-only pages, a SIGSEGV handler that twins and opens a page
// on its first write, and the comparison with the twins after each fiber.
#include "sim_plain.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace tandem::sim::internal {
namespace {

std::atomic<PageWatch*> g_armed{nullptr};  // the one armed watch of the process
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
    // Another thread writes a buffer this launch does not own (a copy, a free): left open and
    // no longer watched, so its writes are never taken for a fiber's.
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
  owner_ = pthread_self();
  PageWatch* none = nullptr;
  if (!g_armed.compare_exchange_strong(none, this)) {
    munmap(twins_, pages_ * page_size());
    twins_ = nullptr;
    return false;
  }
  struct sigaction action {};
  action.sa_sigaction = &PageWatch::on_fault;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &g_previous);
  armed_ = true;
  for (const Span& s : spans_) {
    if (mprotect(s.begin, s.bytes, PROT_READ) != 0) {
      stop();
      return false;
    }
  }
  return true;
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
    mprotect(p, size, PROT_READ);
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
  for (const Span& s : spans_) mprotect(s.begin, s.bytes, PROT_READ | PROT_WRITE);
  sigaction(SIGSEGV, &g_previous, nullptr);
  g_armed.store(nullptr, std::memory_order_release);
  munmap(twins_, pages_ * page_size());
  twins_ = nullptr;
  armed_ = false;
  dirty_.clear();
}

}  // namespace tandem::sim::internal
