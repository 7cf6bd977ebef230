// The adversary (TANDEM_SIM_ADVERSARY=1): runs a launch as a GPU may, rather than as the pool of
// sim_engine.cpp does, to break kernels that lean on what a GPU does not promise. One OS thread,
// one seed per launch (the engine's seed and the launch's index), so a failure replays.
//  - Scheduling: blocks start in a random order and at most `resident` run at once; a block that
//    ends frees its slot. Each step runs one round of one resident block drawn at random; fibers
//    are switched out at every flag access, atomic and fence, so lanes and warps interleave there,
//    and a ready fiber may be held back for up to three rounds.
//  - Memory, flag accesses (load_volatile, store_volatile, load_acquire, store_release, the
//    atomics and the fences): a store waits in a buffer until a device or system fence of its
//    thread, a barrier of its block, a release store after it, or a random step makes it visible.
//    A block fence makes it visible to its own block only. A load returns the thread's own
//    buffered store, else any of the address's last versions that is not older than what the
//    thread's fences and acquires have shown it (every version visible then) or than what it read
//    there before (coherence).
//  - Memory, plain stores (in the launches drawn for it): the buffers' pages are watched
//    (sim_plain.hpp), so each fiber's plain stores are known when it is switched out. They wait
//    in a store buffer of their thread until a device or system fence or a release store of that
//    thread, a rare random step or a quiet launch makes them visible (a block fence, a barrier or
//    a sync_warp shows them to the block, and a device fence or release of any thread of that
//    block then to all, as cumulativity allows; a flag store or an atomic to the same bytes
//    supersedes them, visible first); before each fiber runs, memory shows what its thread may see,
//    so its plain and flag loads read the bytes from before the stores hidden from it.
//  - Watchdog: a launch whose threads make `watchdog` flag accesses and warp exchanges while
//    nothing progresses (a store or atomic that changes memory, a barrier, a thread or block that
//    ends or starts) fails,
//    naming each resident block's warps, where they wait, and the blocks not started. A thread
//    that spins on a plain C++ load is never switched out: the simulator cannot see that spin.
// Stronger orders than the PTX model asks for (a device fence shows the thread all that is
// visible; system scope is device scope, the simulator having one device) make the model miss
// some bad executions, never report a good one.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "sim_internal.hpp"
#include "sim_plain.hpp"
#include "tandem/errors.hpp"

namespace tandem::sim {

using namespace internal;

class Adversary {
 public:
  // The engine's options, with the launch's seed in place of the engine's (blocks shuffle their
  // threads from it too): the seed alone replays the launch.
  Adversary(SimEngine& engine, const gpu::LaunchConfig& config, const std::function<void()>& body,
            EngineOptions options, const AdversaryOptions& adversary, std::uint64_t launch_index,
            const std::atomic<bool>* failed, std::atomic<std::uint64_t>* progress)
      : engine_(engine), config_(config), body_(body), options_(options), launch_index_(launch_index),
        failed_(failed), progress_counter_(progress) {
    options_.seed = adversary.seed;
    options_.watchdog = adversary.watchdog;
    std::uint64_t mix = adversary.seed;
    rng_ = splitmix(mix);
    blocks_ = std::uint64_t(config.grid.x) * config.grid.y * config.grid.z;
    resident_ = adversary.resident != 0 ? adversary.resident : 1 + static_cast<unsigned>(draw() % 4);
    watch_plain_ = adversary.plain_one_in <= 1 || draw() % adversary.plain_one_in == 0;
    watch_from_start_ = adversary.plain_one_in <= 1;
  }

  void run();

  std::uint64_t load(const void* p, std::size_t bytes, bool acquire, const std::source_location& where);
  void store(void* p, std::size_t bytes, std::uint64_t bits, bool release, const std::source_location& where);
  void fence(Scope scope, const std::source_location& where);
  void rmw_begin(void* p, std::size_t bytes, const std::source_location& where);
  void rmw_end(void* p, std::size_t bytes);
  void barrier(Block& b);
  // Around each run of fiber f of block b: memory shows what its thread may see; then its plain
  // stores join its store buffer.
  void resuming(const Block& b, const Fiber& f) { plain_.show({b.linear, f.rank}); }
  void ran(const Block& b, const Fiber& f) { plain_.ran({b.linear, f.rank}); }
  // A sync_warp orders its lanes' memory accesses for each other (CUDA's __syncwarp): their plain
  // stores are shown to the block (more than the warp: a bug missed, never a good kernel flagged).
  void warp_synced(const Block& b, unsigned base, unsigned lanes) {
    for (unsigned l = 0; l < lanes; ++l) plain_.show_to_block(b.linear, &b.fibers[base + l].rank);
  }

 private:
  struct Pending {
    unsigned char* addr;
    std::size_t bytes;
    std::uint64_t bits;
    const Block* block;
    unsigned rank;
    bool release;
    bool block_visible;  // a block fence showed it to its block
  };
  struct Version {
    std::uint64_t seq, bits;
  };
  static constexpr std::size_t kVersions = 4;  // versions a load may choose from, per address
  static constexpr std::uint64_t kPlainPatience = 4096;  // quiet flag accesses before plain stores show

  std::uint64_t draw() { return splitmix(rng_); }
  std::uint64_t next_block();
  // Switches the running fiber out at a flag access (the scheduler picks who runs next).
  Running& yield(const char* access, const std::source_location& where);
  void start_block();
  [[noreturn]] void hung();
  std::string launch_text() const;

  static std::uint64_t read(const void* p, std::size_t bytes) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, p, bytes);
    return bits;
  }
  // The newest value of p becomes a version (it changed since, by a plain store or the host).
  std::vector<Version>& versions_of(const void* p, std::size_t bytes) {
    auto& vs = versions_[p];
    const std::uint64_t now = read(p, bytes);
    if (vs.empty() || vs.back().bits != now) push(vs, now);
    return vs;
  }
  void push(std::vector<Version>& vs, std::uint64_t bits) {
    vs.push_back({++seq_, bits});
    if (vs.size() > kVersions) vs.erase(vs.begin());
  }
  static bool same_thread(const Pending& e, const Block* b, unsigned rank) { return e.block == b && e.rank == rank; }
  // Makes pending_[i] visible, after what must go before it: the same thread's earlier stores to
  // the same address, and for a release all of that thread's earlier stores.
  void flush(std::size_t i);
  void flush_thread(const Block* b, unsigned rank);
  void flush_all() {
    while (!pending_.empty()) flush(0);
  }
  // Plain stores, in the launches drawn for it: watched from the start of a launch_adversarial,
  // and from the first flag access of a launch under TANDEM_SIM_ADVERSARY (there kernels that
  // never make one pay nothing for it).
  void watch() {
    if (watch_tried_ || !watch_plain_) return;
    watch_tried_ = true;
    plain_.start(engine_.buffer_spans());
  }

  SimEngine& engine_;
  const gpu::LaunchConfig& config_;
  const std::function<void()>& body_;
  EngineOptions options_;
  std::uint64_t launch_index_;
  const std::atomic<bool>* failed_;
  std::atomic<std::uint64_t>* progress_counter_;
  std::uint64_t rng_ = 0;
  std::uint64_t blocks_ = 0, started_ = 0;
  std::map<std::uint64_t, std::uint64_t> shuffled_;  // a lazy Fisher-Yates shuffle of the block ids
  unsigned resident_ = 1;
  std::vector<std::unique_ptr<Block>> running_;
  std::vector<Pending> pending_;
  std::unordered_map<const void*, std::vector<Version>> versions_;
  std::uint64_t seq_ = 0;
  std::uint64_t progress_ = 0;  // memory changes, barriers, threads and blocks that ended or started
  std::uint64_t rmw_before_ = 0;
  // flag accesses and warp exchanges: the watchdog counts those made since the last progress
  std::uint64_t accesses_ = 0;
  PlainStores plain_;
  bool watch_plain_ = true;
  bool watch_from_start_ = true;  // else from the launch's first flag access
  bool watch_tried_ = false;
};

std::uint64_t Adversary::next_block() {
  const std::uint64_t k = started_++;
  const std::uint64_t j = k + draw() % (blocks_ - k);
  auto at = [&](std::uint64_t i) {
    const auto it = shuffled_.find(i);
    return it == shuffled_.end() ? i : it->second;
  };
  const std::uint64_t pick = at(j);
  shuffled_[j] = at(k);
  shuffled_.erase(k);
  return pick;
}

void Adversary::start_block() {
  auto b = std::make_unique<Block>();
  b->launch_failed = failed_;
  b->progress = progress_counter_;
  b->hang_seconds = options_.hang_seconds;
  b->adversary = this;
  init_block(*b, next_block(), config_, body_, options_, 0);
  running_.push_back(std::move(b));
  ++progress_;
}

std::string Adversary::launch_text() const {
  return "launch " + std::to_string(launch_index_) + " of this backend, launch seed " + std::to_string(options_.seed) +
         " (tandem::sim::launch_adversarial with it replays this launch; under TANDEM_SIM_ADVERSARY the same "
         "TANDEM_SIM_SEED replays the program), at most " + std::to_string(resident_) + " blocks resident";
}

void Adversary::run() {
  Running& r = tl_running;
  adversarial = true;
  if (watch_from_start_) watch();
  std::uint64_t quiet_since = 0, seen = 0;
  try {
    for (;;) {
      while (running_.size() < resident_ && started_ < blocks_) start_block();
      if (running_.empty()) break;
      const std::size_t i = draw() % running_.size();
      Block& b = *running_[i];
      const std::uint64_t events = b.events, exchanges = b.exchanges;
      const bool done = step_block(r, b);
      progress_ += b.events - events;
      accesses_ += b.exchanges - exchanges;  // a warp that spins on ballots alone is seen too
      if (done) {
        b.fibers.clear();
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
        ++progress_;
      }
      if (!pending_.empty() && draw() % 3 == 0) flush(draw() % pending_.size());
      // A hidden plain store becomes visible at a rare random step, or when the launch has gone
      // quiet (a spin on it must end, as on a GPU): as late as a GPU may show it, to catch
      // readers that lean on it without a fence.
      if (plain_.active() && (draw() % 64 == 0 || accesses_ - quiet_since > kPlainPatience)) {
        plain_.publish_some(draw());
      }
      if (progress_ != seen) {
        seen = progress_;
        quiet_since = accesses_;
      } else if (accesses_ - quiet_since > options_.watchdog) {
        hung();
      }
    }
    flush_all();
  } catch (...) {
    for (auto& b : running_) unwind_block(r, *b);
    running_.clear();
    plain_.finish();
    r.block = nullptr;
    adversarial = false;
    throw;
  }
  plain_.finish();
  r.block = nullptr;
  adversarial = false;
}

// Names every resident block's warps by where their threads are, then the blocks not started.
void Adversary::hung() {
  std::string report = "simulator: kernel '" + std::string(config_.kernel) + "' hung: nothing progressed in " +
                       std::to_string(options_.watchdog) + " flag accesses and warp exchanges (TANDEM_SIM_WATCHDOG; " + launch_text() +
                       ")";
  for (const auto& b : running_) report += where_threads_are(*b);
  const std::uint64_t waiting = blocks_ - started_;
  if (waiting > 0) {
    report += "\n  " + std::to_string(waiting) + " blocks not started: they start when a resident block ends";
  }
  throw DeviceError(report);
}

Running& Adversary::yield(const char* access, const std::source_location& where) {
  Running& r = running();
  Fiber& f = *r.fiber;
  ++accesses_;
  f.state = State::ready;
  f.access = access;
  f.where = where;
  suspend(r);
  f.access = nullptr;
  return r;
}

void Adversary::flush(std::size_t i) {
  for (;;) {
    const Pending& e = pending_[i];
    std::size_t first = i;
    for (std::size_t j = 0; j < i; ++j) {
      const Pending& o = pending_[j];
      if (same_thread(o, e.block, e.rank) && (e.release || o.addr == e.addr)) {
        first = j;
        break;
      }
    }
    const Pending go = pending_[first];
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(first));
    plain_.supersede(go.addr, go.bytes);
    auto& vs = versions_of(go.addr, go.bytes);
    if (vs.back().bits != go.bits) ++progress_;
    std::memcpy(go.addr, &go.bits, go.bytes);
    plain_.wrote(go.addr, go.bytes);
    push(vs, go.bits);
    if (first == i) return;
    --i;  // the entry moved down by one
  }
}

void Adversary::flush_thread(const Block* b, unsigned rank) {
  for (std::size_t i = 0; i < pending_.size();) {
    if (same_thread(pending_[i], b, rank)) {
      flush(i);
    } else {
      ++i;
    }
  }
}

std::uint64_t Adversary::load(const void* p, std::size_t bytes, bool acquire, const std::source_location& where) {
  watch();
  Running& r = yield(acquire ? "load_acquire" : "load_volatile", where);
  Fiber& f = *r.fiber;
  const Block* b = r.block;
  for (std::size_t j = pending_.size(); j-- > 0;) {  // its own store, then one its block was shown
    const Pending& e = pending_[j];
    if (e.addr == p && same_thread(e, b, f.rank)) return e.bits;
  }
  for (std::size_t j = pending_.size(); j-- > 0;) {
    const Pending& e = pending_[j];
    if (e.addr == p && e.block == b && e.block_visible) return e.bits;
  }
  const auto it = versions_.find(p);
  if (it == versions_.end()) return read(p, bytes);  // never stored through a flag access
  auto& vs = versions_of(p, bytes);
  const auto last = f.last_read.find(p);
  const std::uint64_t floor = std::max(f.view, last == f.last_read.end() ? 0 : last->second);
  std::size_t oldest = 0;
  for (std::size_t k = 0; k < vs.size(); ++k) {
    if (vs[k].seq <= floor) oldest = k;
  }
  // Half the time the newest, so that a spin ends; otherwise any version still allowed.
  const std::size_t pick = draw() % 2 == 0 ? vs.size() - 1 : oldest + draw() % (vs.size() - oldest);
  f.last_read[p] = vs[pick].seq;
  if (acquire) f.view = std::max(f.view, vs[pick].seq);
  return vs[pick].bits;
}

void Adversary::store(void* p, std::size_t bytes, std::uint64_t bits, bool release,
                      const std::source_location& where) {
  watch();
  Running& r = yield(release ? "store_release" : "store_volatile", where);
  if (release) plain_.publish({r.block->linear, r.fiber->rank});
  pending_.push_back({static_cast<unsigned char*>(p), bytes, bits, r.block, r.fiber->rank, release, false});
}

void Adversary::fence(Scope scope, const std::source_location& where) {
  watch();
  Running& r = yield(scope == Scope::block    ? "thread_fence_block"
                     : scope == Scope::device ? "thread_fence"
                                              : "thread_fence_system",
                     where);
  const Block* b = r.block;
  const unsigned rank = r.fiber->rank;
  if (scope == Scope::block) {
    for (Pending& e : pending_) {
      if (same_thread(e, b, rank)) e.block_visible = true;
    }
    plain_.show_to_block(b->linear, &rank);
    return;
  }
  plain_.publish({b->linear, rank});
  flush_thread(b, rank);
  r.fiber->view = seq_;
}

void Adversary::rmw_begin(void* p, std::size_t bytes, const std::source_location& where) {
  watch();
  Running& r = yield("atomic", where);
  for (std::size_t i = 0; i < pending_.size();) {  // its own stores to p come first
    if (pending_[i].addr == p && same_thread(pending_[i], r.block, r.fiber->rank)) {
      flush(i);
    } else {
      ++i;
    }
  }
  plain_.supersede(p, bytes);
  rmw_before_ = versions_of(p, bytes).back().bits;
}

void Adversary::rmw_end(void* p, std::size_t bytes) {
  if (versions_of(p, bytes).back().bits != rmw_before_) ++progress_;
  plain_.wrote(p, bytes);
}

void Adversary::barrier(Block& b) {
  for (std::size_t i = 0; i < pending_.size();) {
    if (pending_[i].block == &b) {
      flush(i);
    } else {
      ++i;
    }
  }
  for (Fiber& f : b.fibers) f.view = seq_;
  plain_.show_to_block(b.linear, nullptr);
}


// ---- what kernels call (sim.hpp) ----

namespace {
Adversary& adversary() { return *running().block->adversary; }
}  // namespace

std::uint64_t adversary_load(const void* p, std::size_t bytes, bool acquire, const std::source_location& where) {
  return adversary().load(p, bytes, acquire, where);
}
void adversary_store(void* p, std::size_t bytes, std::uint64_t bits, bool release, const std::source_location& where) {
  adversary().store(p, bytes, bits, release, where);
}
void adversary_fence(Scope scope, const std::source_location& where) { adversary().fence(scope, where); }
void adversary_rmw_begin(void* p, std::size_t bytes, const std::source_location& where) {
  adversary().rmw_begin(p, bytes, where);
}
void adversary_rmw_end(void* p, std::size_t bytes) { adversary().rmw_end(p, bytes); }

namespace internal {
void adversary_barrier(Block& b) { b.adversary->barrier(b); }
void adversary_resuming(Block& b, Fiber& f) { b.adversary->resuming(b, f); }
void adversary_warp_synced(Block& b, unsigned base, unsigned lanes) { b.adversary->warp_synced(b, base, lanes); }
void adversary_ran(Block& b, Fiber& f) { b.adversary->ran(b, f); }
}  // namespace internal

void SimEngine::adversary_launch(const gpu::LaunchConfig& config, const std::function<void()>& thread_body,
                                 const AdversaryOptions& options) {
  failed_ = false;
  progress_ = 0;
  Adversary adversary(*this, config, thread_body, options_, options, launch_index_, &failed_, &progress_);
  adversary.run();
}

}  // namespace tandem::sim
