// The simulator's engine. Each OS thread of the pool takes blocks from a shared counter and runs
// one block at a time: one fiber per GPU thread, switched by a scheduler loop that runs every
// ready fiber (in a shuffled order) until it waits at a barrier or a warp exchange or ends, then
// settles the waits: a warp exchange completes when all lanes of the warp reach it, a barrier
// when all threads of the block reach the same one. Any other state is divergence, reported.
// Under TANDEM_SIM_ADVERSARY the launch runs in sim_adversary.cpp instead, over the same rounds.
#include "sim_engine.hpp"
#include "sim_internal.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "tandem/errors.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define TANDEM_SIM_ASAN 1
#endif

namespace tandem::sim::internal {

thread_local Running tl_running;

namespace {

namespace bctx = boost::context;

constexpr std::size_t kStackBytes = 256 * 1024;  // per GPU thread; a page below it faults on overflow

std::size_t page_bytes() {
  static const std::size_t bytes = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

// Fiber stacks, reused from block to block on each OS thread.
class StackPool {
 public:
  StackPool() { free_.reserve(gpu::kMaxBlockThreads); }
  ~StackPool() {
    for (void* base : free_) munmap(base, kStackBytes + page_bytes());
  }
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;
  bctx::stack_context take() {
    void* base = nullptr;
    if (!free_.empty()) {
      base = free_.back();
      free_.pop_back();
    } else {
      base = mmap(nullptr, kStackBytes + page_bytes(), PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (base == MAP_FAILED || mprotect(base, page_bytes(), PROT_NONE) != 0) {
        if (base != MAP_FAILED) munmap(base, kStackBytes + page_bytes());
        throw DeviceError("simulator: no memory map left for a GPU thread's stack (two maps each, at most "
                          "vm.max_map_count in a process): use fewer OS threads (TANDEM_SIM_THREADS) or smaller blocks");
      }
    }
    bctx::stack_context sc;
    sc.size = kStackBytes;
    sc.sp = static_cast<char*>(base) + page_bytes() + kStackBytes;
    return sc;
  }
  void give(const bctx::stack_context& sc) noexcept {
    void* base = static_cast<char*>(sc.sp) - kStackBytes - page_bytes();
    if (free_.size() < free_.capacity()) {
      free_.push_back(base);
    } else {
      munmap(base, kStackBytes + page_bytes());
    }
  }

 private:
  std::vector<void*> free_;
};
thread_local StackPool tl_stacks;

// Boost.Context stack allocator drawing on the thread's pool; tells the fiber where its stack is.
struct PooledStack {
  Fiber* fiber;
  bctx::stack_context allocate() {
    bctx::stack_context sc = tl_stacks.take();
    fiber->stack_bottom = static_cast<char*>(sc.sp) - sc.size;
    fiber->stack_size = sc.size;
    return sc;
  }
  void deallocate(bctx::stack_context& sc) noexcept { tl_stacks.give(sc); }
};

thread_local Block tl_block_storage;

}  // namespace

std::uint64_t splitmix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string text(gpu::Dim3 d) {
  std::string s(1, '(');  // built by appending: GCC 12 warns falsely (-Wrestrict) on "(" + std::string
  s.append(std::to_string(d.x)).append(",").append(std::to_string(d.y)).append(",").append(std::to_string(d.z));
  return s.append(")");
}

std::string text(const std::source_location& where) {
  std::string file = where.file_name();
  const auto slash = file.find_last_of('/');
  if (slash != std::string::npos) file = file.substr(slash + 1);
  return file + ":" + std::to_string(where.line()) + ":" + std::to_string(where.column());
}

// Two waits are at the same place when file, line and column agree. The file names of one call site
// are one string: compared by address first (strcmp per lane took 13% of sim:matmul under ASan).
bool same_place(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::strcmp(a.file_name(), b.file_name()) == 0);
}

const char* text(WarpOp op) {
  switch (op) {
    case WarpOp::shfl:
      return "shfl";
    case WarpOp::shfl_down:
      return "shfl_down";
    case WarpOp::shfl_up:
      return "shfl_up";
    case WarpOp::shfl_xor:
      return "shfl_xor";
    case WarpOp::ballot:
      return "ballot";
    case WarpOp::any:
      return "any";
    case WarpOp::all:
      return "all";
    case WarpOp::sync:
      return "sync_warp";
  }
  return "?";
}

std::string kernel_and_block(const Block& b) {
  return "kernel '" + std::string(b.config->kernel) + "', block " + text(b.idx);
}

std::string describe(const Fiber& f) {
  const std::string who = "thread " + text(f.tid);
  switch (f.state) {
    case State::ready:
      return who + " is running";
    case State::exited:
      return who + " has exited";
    case State::barrier:
      return who + " waits at the barrier at " + text(f.where);
    case State::warp:
      return who + " waits at " + text(f.op) + " at " + text(f.where);
  }
  return who;
}

[[noreturn]] void fail(const Block& b, const std::string& what) {
  throw DeviceError("simulator: " + kernel_and_block(b) + ": " + what);
}

// This thread's block and fiber, from inside a kernel.
Running& running() {
  Running& r = tl_running;
  if (r.fiber == nullptr) {
    throw InvalidArgument("a tandem::gpu device function was called outside a kernel launch (tandem::launch, tandem::sim::launch)");
  }
  return r;
}
Fiber& current_fiber() { return *running().fiber; }

// Switches from the running fiber back to the scheduler until the scheduler resumes it (on this
// thread: a block's fibers never leave the thread that runs the block, so r stays this thread's).
void suspend(Running& r) {
  Block& b = *r.block;
  Fiber* self = r.fiber;  // copy before switching: the other fibers change r.fiber meanwhile
#ifdef TANDEM_SIM_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, b.scheduler_bottom, b.scheduler_size);
#endif
  self->sink = std::move(self->sink).resume();
#ifdef TANDEM_SIM_ASAN
  __sanitizer_finish_switch_fiber(fake, &b.scheduler_bottom, &b.scheduler_size);
#endif
  r.fiber = self;
  if (b.unwinding) throw Unwind{};
}

// The scheduler resumes fiber f until it waits or ends.
void resume(Running& r, Fiber& f) {
  r.fiber = &f;
#ifdef TANDEM_SIM_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stack_bottom, f.stack_size);
#endif
  f.context = std::move(f.context).resume();
#ifdef TANDEM_SIM_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  r.fiber = nullptr;
}

// Completes the warp exchange all lanes of warp w wait at; returns false when none waits there.
bool settle_warp(Block& b, unsigned w) {
  const unsigned width = b.warp;
  const unsigned base = w * width;
  const unsigned lanes = std::min(width, b.threads - base);
  unsigned waiting = 0;
  const Fiber* first = nullptr;
  for (unsigned l = 0; l < lanes; ++l) {
    const Fiber& f = b.fibers[base + l];
    if (f.state == State::ready) return false;  // switched out on its way (adversary): not yet
    if (f.state == State::warp) {
      ++waiting;
      if (first == nullptr) first = &f;
    }
  }
  if (waiting == 0) return false;
  for (unsigned l = 0; l < lanes; ++l) {
    const Fiber& f = b.fibers[base + l];
    if (f.state != State::warp) {
      fail(b, "warp divergence in warp " + std::to_string(w) + ": " + describe(*first) + " while " + describe(f) +
                  " (every lane of a warp must reach the same warp exchange)");
    }
    if (f.op != first->op || !same_place(f.where, first->where)) {
      fail(b, "warp divergence in warp " + std::to_string(w) + ": " + describe(*first) + " while " + describe(f));
    }
  }
  const WarpOp op = first->op;
  if (op == WarpOp::ballot || op == WarpOp::any || op == WarpOp::all) {
    std::uint64_t mask = 0;
    for (unsigned l = 0; l < lanes; ++l) {
      if (b.fibers[base + l].bits != 0) mask |= std::uint64_t(1) << l;
    }
    const std::uint64_t full = lanes == 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << lanes) - 1;
    const std::uint64_t result = op == WarpOp::ballot ? mask : op == WarpOp::any ? (mask != 0) : (mask == full);
    for (unsigned l = 0; l < lanes; ++l) b.fibers[base + l].result = result;
  } else if (op != WarpOp::sync) {
    for (unsigned l = 0; l < lanes; ++l) {
      Fiber& f = b.fibers[base + l];
      unsigned src = l;
      switch (op) {
        case WarpOp::shfl:
          src = f.param % width;
          break;
        case WarpOp::shfl_down:
          src = f.param < width - l ? l + f.param : l;
          break;
        case WarpOp::shfl_up:
          src = f.param <= l ? l - f.param : l;
          break;
        case WarpOp::shfl_xor:
          src = (l ^ f.param) < width ? l ^ f.param : l;
          break;
        default:
          break;
      }
      if (src >= lanes) {
        fail(b, "thread " + text(f.tid) + ": " + text(op) + " at " + text(f.where) + " reads lane " +
                    std::to_string(src) + " of warp " + std::to_string(w) + ", which does not exist: the block has " +
                    std::to_string(b.threads) + " threads, so that warp has only " + std::to_string(lanes) +
                    " lanes (make the block size a multiple of the warp size)");
      }
      f.result = b.fibers[base + src].bits;
    }
  }
  for (unsigned l = 0; l < lanes; ++l) b.fibers[base + l].state = State::ready;
  ++b.exchanges;
  if (op == WarpOp::sync && b.adversary != nullptr) adversary_warp_synced(b, base, lanes);
  return true;
}

// Releases a block-wide barrier, or reports why it cannot be released.
void settle_barrier(Block& b) {
  const Fiber* waiting = nullptr;
  const Fiber* gone = nullptr;
  for (const Fiber& f : b.fibers) {
    if (f.state == State::barrier && waiting == nullptr) waiting = &f;
    if (f.state == State::exited && gone == nullptr) gone = &f;
  }
  if (gone != nullptr) {
    fail(b, "barrier divergence: " + describe(*gone) + " while " + describe(*waiting) +
                " (every thread of a block must reach every sync_threads(); do not return early before one)");
  }
  for (const Fiber& f : b.fibers) {
    if (!same_place(f.where, waiting->where)) {
      fail(b, "barrier divergence: " + describe(*waiting) + " while " + describe(f));
    }
  }
  for (Fiber& f : b.fibers) f.state = State::ready;
}


bool step_block(Running& r, Block& b) {
  r.block = &b;
  if (!b.mbarriers.empty() || !b.copies.empty()) hopper_round(b);
  if (b.shuffle) {
    for (unsigned i = b.threads; i > 1; --i) std::swap(b.order[i - 1], b.order[splitmix(b.rng) % i]);
  }
  for (unsigned i : b.order) {
    Fiber& f = b.fibers[i];
    if (f.state != State::ready) continue;
    if (b.adversary != nullptr && f.skipped < 3 && splitmix(b.rng) % 8 == 0) {
      ++f.skipped;  // starved for a round or three
      continue;
    }
    f.skipped = 0;
    if (b.adversary != nullptr) adversary_resuming(b, f);
    resume(r, f);
    if (b.adversary != nullptr) adversary_ran(b, f);
    if (f.state == State::exited) ++b.events;
    if (b.error) std::rethrow_exception(b.error);
  }
  bool settled = false;
  const unsigned warps = (b.threads + b.warp - 1) / b.warp;
  for (unsigned w = 0; w < warps; ++w) settled = settle_warp(b, w) || settled;
  if (settled) return false;
  unsigned exited = 0;
  for (const Fiber& f : b.fibers) {
    if (f.state == State::ready) return false;
    exited += f.state == State::exited ? 1 : 0;
  }
  if (exited == b.threads) {
    hopper_block_ended(b);
    return true;
  }
  settle_barrier(b);
  ++b.events;
  if (b.adversary != nullptr) adversary_barrier(b);
  return false;
}

void init_block(Block& b, std::uint64_t linear, const gpu::LaunchConfig& cfg, const std::function<void()>& body,
                const EngineOptions& options, std::uint64_t launch_index) {
  b.config = &cfg;
  b.body = &body;
  b.linear = linear;
  b.idx = {static_cast<unsigned>(linear % cfg.grid.x), static_cast<unsigned>((linear / cfg.grid.x) % cfg.grid.y),
           static_cast<unsigned>(linear / (std::uint64_t(cfg.grid.x) * cfg.grid.y))};
  b.threads = cfg.block.x * cfg.block.y * cfg.block.z;
  b.warp = options.warp_size;
  b.shuffle = options.shuffle;
  b.error = nullptr;
  b.shared_limit = cfg.large_shared ? options.shared_memory_opt_in : options.shared_memory_per_block;
  if (b.shared.size() != b.shared_limit) b.shared.assign(b.shared_limit, kSharedPoison);
  b.slots.clear();
  std::uint64_t mix = options.seed ^ (launch_index * 0x9e3779b97f4a7c15ull);
  b.rng = splitmix(mix) ^ linear;
  // The dynamic window starts where a GPU may start it: CUDA promises 16-byte alignment and no
  // more (static variables and reserved bytes may come first), so it lies at a multiple of 16
  // below 1024 drawn per block; a kernel that needs 128 or 1024 must realign.
  std::uint64_t place = mix ^ (linear * 0xbf58476d1ce4e5b9ull);
  const std::size_t room = (b.shared_limit - std::min(b.shared_limit, cfg.dynamic_shared_bytes)) / 16 * 16;
  b.dynamic_offset = cfg.dynamic_shared_bytes == 0 ? 0 : std::min<std::size_t>(16 * (splitmix(place) % 64), room);
  std::memset(b.shared.data() + b.dynamic_offset, kSharedPoison, cfg.dynamic_shared_bytes);
  b.shared_top = b.dynamic_offset + cfg.dynamic_shared_bytes;
  b.order.resize(b.threads);
  for (unsigned i = 0; i < b.threads; ++i) b.order[i] = i;
  b.unwinding = false;
  b.events = 0;
  b.exchanges = 0;
  b.mbarriers.clear();
  b.copies.clear();
  b.rounds = b.mbarrier_events = b.mbarrier_waits = b.seen = 0;
  b.idle_rounds = 0;

  b.fibers.clear();
  b.fibers.reserve(gpu::kMaxBlockThreads);  // fibers keep pointers into this vector: never reallocate
  const unsigned bx = cfg.block.x, by = cfg.block.y;
  for (unsigned r = 0; r < b.threads; ++r) {
    Fiber& f = b.fibers.emplace_back();
    f.tid = {r % bx, (r / bx) % by, r / (bx * by)};
    f.rank = r;
    f.context = bctx::fiber(std::allocator_arg, PooledStack{&f}, [&b, &f](bctx::fiber&& sink) -> bctx::fiber {
#ifdef TANDEM_SIM_ASAN
      __sanitizer_finish_switch_fiber(nullptr, &b.scheduler_bottom, &b.scheduler_size);
#endif
      f.sink = std::move(sink);
      try {
        if (!b.unwinding) (*b.body)();  // a thread first resumed to unwind its failed block never starts
      } catch (const Unwind&) {
      } catch (const bctx::detail::forced_unwind&) {
        throw;
      } catch (const tandem::Error&) {
        if (!b.error) b.error = std::current_exception();
      } catch (const std::exception& e) {
        if (!b.error) {
          b.error = std::make_exception_ptr(
              DeviceError("simulator: " + kernel_and_block(b) + ", thread " + text(f.tid) + " threw: " + e.what()));
        }
      }
      f.state = State::exited;
#ifdef TANDEM_SIM_ASAN
      __sanitizer_start_switch_fiber(nullptr, b.scheduler_bottom, b.scheduler_size);
#endif
      return std::move(f.sink);
    });
  }
}

std::string where_threads_are(const Block& b) {
  std::string report = "\n  block " + text(b.idx) + ":";
  const unsigned warps = (b.threads + b.warp - 1) / b.warp;
  for (unsigned w = 0; w < warps; ++w) {
    std::map<std::string, unsigned> places;  // where -> threads
    for (unsigned t = w * b.warp; t < std::min(b.threads, (w + 1) * b.warp); ++t) {
      const Fiber& f = b.fibers[t];
      ++places[f.state == State::exited    ? "ended"
               : f.state == State::barrier ? "at the barrier at " + text(f.where)
               : f.state == State::warp    ? "at " + std::string(text(f.op)) + " at " + text(f.where)
               : f.access != nullptr       ? std::string(f.access) + " at " + text(f.where)
               : f.where.line() != 0       ? "running, last switched at " + text(f.where)
                                           : "running"];
    }
    // appended piece by piece: GCC 12 warns falsely (-Wrestrict) on " " + std::string
    report.append("\n    warp ").append(std::to_string(w)).append(":");
    for (const auto& [at, n] : places) report.append(" ").append(std::to_string(n)).append(" threads ").append(at).append(";");
  }
  return report;
}

void unwind_block(Running& r, Block& b) noexcept {
  r.block = &b;
  b.unwinding = true;
  for (Fiber& f : b.fibers) {
    if (f.context) resume(r, f);
  }
  b.fibers.clear();
}

}  // namespace tandem::sim::internal

namespace tandem::sim {

using namespace internal;

// ---- host side ----

SimEngine::SimEngine(const EngineOptions& options) : options_(options) {
  unsigned threads = options_.threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < threads; ++i) {
    workers_.emplace_back([this] {
      std::uint64_t seen = 0;
      for (;;) {
        {
          std::unique_lock lock(pool_mutex_);
          wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
          if (stopping_) return;
          seen = generation_;
        }
        work();
        std::lock_guard lock(pool_mutex_);
        if (--busy_ == 0) done_.notify_all();
      }
    });
  }
}

SimEngine::~SimEngine() {
  {
    std::lock_guard lock(pool_mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
  release_all();
}

void SimEngine::check_launch(const gpu::LaunchConfig& config) const {
  const auto& g = config.grid;
  const auto& k = config.block;
  const std::string name = std::string("simulator: launch of kernel '") + config.kernel + "'";
  if (tl_running.fiber != nullptr) {  // it would wait for the launch it runs in: a hang
    throw InvalidArgument(name + " from inside a kernel: GPU threads cannot launch kernels here; launch it "
                                 "after the kernel that would, from the host");
  }
  const std::uint64_t threads = std::uint64_t(k.x) * k.y * k.z;
  if (threads == 0 || threads > gpu::kMaxBlockThreads || k.z > 64) {
    throw DeviceError(name + " failed: block " + text(k) + " must have 1 to " + std::to_string(gpu::kMaxBlockThreads) +
                      " threads (z at most 64)");
  }
  if (g.x == 0 || g.y == 0 || g.z == 0 || g.y > 65535 || g.z > 65535 || g.x > 2147483647u) {
    throw DeviceError(name + " failed: grid " + text(g) + " must be at least (1,1,1), y and z at most 65535");
  }
  const std::size_t limit = config.large_shared ? options_.shared_memory_opt_in : options_.shared_memory_per_block;
  if (config.dynamic_shared_bytes > limit) {
    throw DeviceError(name + " failed: " + std::to_string(config.dynamic_shared_bytes) +
                      " bytes of dynamic shared memory asked, " + std::to_string(limit) + " available per block" +
                      (config.large_shared ? "" : " (LaunchConfig::large_shared opts in to more)"));
  }
}

void SimEngine::run_adversarial(const gpu::LaunchConfig& config, const std::function<void()>& thread_body,
                                const AdversaryOptions& options) {
  check_launch(config);
  std::lock_guard launch_lock(launch_mutex_);
  ++launch_index_;
  adversary_launch(config, thread_body, options);
  check_guards(config.kernel);
}

void SimEngine::run(const gpu::LaunchConfig& config, const std::function<void()>& thread_body) {
  check_launch(config);
  const auto& g = config.grid;
  std::lock_guard launch_lock(launch_mutex_);
  ++launch_index_;
  if (options_.adversary) {  // a seed per launch, from the engine's seed and the launch's index
    std::uint64_t mix = options_.seed ^ (launch_index_ * 0xd1b54a32d192ed03ull);
    adversary_launch(config, thread_body, {splitmix(mix), options_.resident, options_.watchdog, 8});
    check_guards(config.kernel);
    return;
  }
  config_ = &config;
  body_ = &thread_body;
  blocks_ = std::uint64_t(g.x) * g.y * g.z;
  next_block_ = 0;
  failed_ = false;
  progress_ = 0;
  error_ = nullptr;
  {
    std::lock_guard lock(pool_mutex_);
    busy_ = static_cast<unsigned>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  work();
  {
    std::unique_lock lock(pool_mutex_);
    done_.wait(lock, [&] { return busy_ == 0; });
  }
  config_ = nullptr;
  body_ = nullptr;
  if (error_) std::rethrow_exception(error_);
  check_guards(config.kernel);
}

void SimEngine::run_with(const gpu::LaunchConfig& config, const std::function<void()>& thread_body,
                         const BlockRunner& runner) {
  check_launch(config);
  const auto& g = config.grid;
  std::lock_guard launch_lock(launch_mutex_);
  ++launch_index_;
  config_ = &config;
  body_ = &thread_body;
  failed_ = false;
  progress_ = 0;
  error_ = nullptr;
  struct Clear {
    SimEngine& e;
    ~Clear() {
      e.config_ = nullptr;
      e.body_ = nullptr;
    }
  } clear{*this};
  runner(std::uint64_t(g.x) * g.y * g.z, [this](std::uint64_t linear) {
    if (!failed_.load(std::memory_order_relaxed)) run_one(linear);
  });
  if (error_) std::rethrow_exception(error_);
  check_guards(config.kernel);
}

void SimEngine::work() {
  for (;;) {
    if (failed_.load(std::memory_order_relaxed)) return;
    const std::uint64_t linear = next_block_.fetch_add(1);
    if (linear >= blocks_) return;
    run_one(linear);
  }
}

void SimEngine::run_one(std::uint64_t linear) noexcept {
  try {
    run_block(linear);
    progress_.fetch_add(1, std::memory_order_relaxed);
  } catch (...) {
    std::lock_guard lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
    failed_ = true;
  }
}

void SimEngine::run_block(std::uint64_t linear) {
  Block& b = tl_block_storage;
  b.launch_failed = &failed_;
  b.progress = &progress_;
  b.hang_seconds = options_.hang_seconds;
  b.adversary = nullptr;
  Running& now = tl_running;
  now.block = &b;
  init_block(b, linear, *config_, *body_, options_, launch_index_);
  try {
    // The hang watch of a block whose warps go round without a barrier, an ending thread or
    // progress elsewhere (a spin on warp exchanges alone): checked every 1024 rounds.
    std::uint64_t rounds = 0, events = 0, progress = progress_.load(std::memory_order_relaxed);
    auto quiet_since = std::chrono::steady_clock::now();
    while (!step_block(now, b)) {
      if ((++rounds & 1023u) != 0) continue;
      const auto t = std::chrono::steady_clock::now();
      if (b.events != events || progress_.load(std::memory_order_relaxed) != progress) {
        events = b.events;
        progress = progress_.load(std::memory_order_relaxed);
        quiet_since = t;
      } else if (t - quiet_since > std::chrono::seconds(options_.hang_seconds)) {
        fail(b, "hung: for " + std::to_string(options_.hang_seconds) +
                    " s no thread of the block reached a barrier or ended, and no block of the launch stored a flag "
                    "(TANDEM_SIM_HANG_SECONDS); its threads:" + where_threads_are(b));
      }
    }
  } catch (...) {
    unwind_block(now, b);
    now.block = nullptr;
    throw;
  }
  b.fibers.clear();
  now.block = nullptr;
}

}  // namespace tandem::sim
