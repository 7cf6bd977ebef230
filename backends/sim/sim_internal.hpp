// What the simulator's two schedulers share: the fibers that run GPU threads, the blocks that own
// them, and one scheduling round of a block. sim_engine.cpp runs blocks on a pool of OS threads,
// each to its end; sim_adversary.cpp runs a few resident blocks at once on one OS thread, switching
// fibers at every flag access, under its memory model.
#pragma once

#include <atomic>
#include <boost/context/fiber.hpp>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <source_location>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim_engine.hpp"

namespace tandem::sim {

class Adversary;

namespace internal {

namespace bctx = boost::context;

inline constexpr unsigned char kSharedPoison = 0xFF;  // NaN as f32/f64, -1 as i32

enum class State : unsigned char { ready, barrier, warp, exited };

// A wgmma in flight (sim_hopper.cpp): its accumulators, their values at its issue when it was the
// first in flight on them, and its operands' descriptors.
struct Wgmma {
  float* d = nullptr;
  unsigned n = 0;
  std::vector<float> before;  // empty when an earlier operation in flight had these accumulators
  std::uint64_t desc_a = 0, desc_b = 0;
  std::vector<float> operands;  // what it read at its issue: shared memory may not change under it
  bool accumulate = true, bf16 = true;
  bool mn_major_a = false, mn_major_b = false;  // imm-trans-a, imm-trans-b
  std::source_location where;
};

struct Fiber {
  bctx::fiber context;  // the fiber, while suspended
  bctx::fiber sink;     // the scheduler, while the fiber runs
  gpu::Dim3 tid;
  unsigned rank = 0;
  State state = State::ready;
  std::source_location where;  // of the wait, or of the flag access it was switched out at
  const char* access = nullptr;  // adversary: the flag access it was switched out at
  WarpOp op = WarpOp::sync;
  std::uint64_t bits = 0;
  unsigned param = 0;
  std::uint64_t result = 0;
  const void* stack_bottom = nullptr;
  std::size_t stack_size = 0;
  // the hang watch of spinning threads (sim_engine.cpp)
  std::uint64_t seen_progress = ~std::uint64_t(0);
  std::chrono::steady_clock::time_point spin_since;
  // the adversary's view of memory: the newest version every load must reach (fences, acquires),
  // and per address the version this thread last read (a later read never goes back)
  std::uint64_t view = 0;
  std::unordered_map<const void*, std::uint64_t> last_read;
  unsigned skipped = 0;  // rounds it was held back in a row (starvation, bounded)
  // the mbarrier and parity it last waited on without success (sim_hopper.cpp), for a hang report
  const void* mbarrier = nullptr;
  unsigned parity = 0;
  // its wgmma operations in flight (sim_hopper.cpp): committed groups, then those not yet committed
  std::vector<std::vector<Wgmma>> wgmma_groups;
  std::vector<Wgmma> wgmma_open;
  std::uint64_t wgmma_issued = 0;  // every thread of a warpgroup issues each one
};

// An mbarrier's state (sim_hopper.cpp), kept beside shared memory by its address.
struct MBarrierState {
  std::uint32_t arrivals = 0;  // per phase, from its init
  std::uint32_t pending = 0;   // arrivals still to come in the current phase
  std::int64_t tx = 0;         // transaction bytes expected and not yet completed
  std::uint64_t phase = 0;     // phases completed
  unsigned initializer = 0;    // the thread that initialized it
  bool fenced = false;         // that thread has fenced the init for the TMA unit since
};

// A TMA copy in flight: what it does when it lands, and the round that issued it.
struct AsyncCopy {
  std::function<void()> land;
  std::uint64_t round = 0;
  std::source_location where;
};

struct Block {
  const std::atomic<bool>* launch_failed = nullptr;
  std::atomic<std::uint64_t>* progress = nullptr;  // the launch's flag stores, atomics, finished blocks
  unsigned hang_seconds = 30;
  Adversary* adversary = nullptr;  // set when the adversary runs this block
  const gpu::LaunchConfig* config = nullptr;
  const std::function<void()>* body = nullptr;
  std::uint64_t linear = 0;
  gpu::Dim3 idx;
  unsigned threads = 0;
  unsigned warp = 32;
  bool shuffle = true;  // the threads' order shuffled each round (EngineOptions::shuffle)
  std::vector<Fiber> fibers;
  std::vector<unsigned> order;
  std::exception_ptr error;
  std::vector<unsigned char> shared;
  std::size_t shared_limit = 0;
  std::size_t shared_top = 0;
  std::size_t dynamic_offset = 0;  // where the dynamic window starts in `shared`
  std::vector<std::pair<const void*, std::size_t>> slots;
  std::uint64_t rng = 0;
  const void* scheduler_bottom = nullptr;
  std::size_t scheduler_size = 0;
  bool unwinding = false;  // the block failed: suspended fibers unwind when resumed
  std::uint64_t events = 0;     // barriers released and threads exited: progress
  std::uint64_t exchanges = 0;  // warp exchanges completed (a spin may be made of these alone)
  // The Hopper model (sim_hopper.cpp): mbarriers, copies in flight, and its hang watch.
  std::unordered_map<const void*, MBarrierState> mbarriers;
  std::vector<AsyncCopy> copies;
  std::uint64_t rounds = 0;
  std::uint64_t mbarrier_events = 0;  // arrivals, inits and landed copies
  std::uint64_t mbarrier_waits = 0;   // unsuccessful try_waits
  std::uint64_t seen = 0;             // what had happened at the last round's end
  unsigned idle_rounds = 0;
};

// Thrown inside a suspended fiber to unwind its stack when its block failed. The fibers are
// unwound through the same (sanitizer-annotated) switches as every other resume, rather than by
// Boost.Context's forced unwind, which AddressSanitizer cannot follow.
struct Unwind {};

// What this thread runs: the block, and the fiber while one runs. One thread-local, read once per
// call: each read of a thread-local in a shared library is a call to __tls_get_addr, which
// AddressSanitizer intercepts (with two, TLS lookups took a fifth of sim:matmul's time under ASan).
struct Running {
  Block* block = nullptr;
  Fiber* fiber = nullptr;
};
extern thread_local Running tl_running;

std::uint64_t splitmix(std::uint64_t& state);
std::string text(gpu::Dim3 d);
std::string text(const std::source_location& where);
std::string kernel_and_block(const Block& b);
[[noreturn]] void fail(const Block& b, const std::string& what);
// This thread's block and fiber, from inside a kernel (InvalidArgument outside one).
Running& running();
Fiber& current_fiber();
// From the running fiber back to the scheduler, until the scheduler resumes it.
void suspend(Running& r);

// Makes b ready to run block `linear` of the launch: shared memory, a fiber per thread.
void init_block(Block& b, std::uint64_t linear, const gpu::LaunchConfig& config, const std::function<void()>& body,
                const EngineOptions& options, std::uint64_t launch_index);
// The Hopper model's part of each round of b (sim_hopper.cpp): lands some of the copies in flight
// and watches for threads waiting on mbarriers that nothing can complete. Before the round's fibers run.
void hopper_round(Block& b);
// When b's threads have all ended: fails if copies are still in flight.
void hopper_block_ended(const Block& b);
// One round: every ready fiber runs until it waits, is switched out or ends (in a shuffled order;
// under the adversary some are held back), then the warp exchanges and the barrier that all their
// threads reached complete. True when every thread of the block has ended. Throws what a thread
// threw, or DeviceError for divergence.
bool step_block(Running& r, Block& b);
// Where the threads of b are, warp by warp ("\n  block (1,0,0):\n    warp 0: 32 threads at ..."),
// for a report of a hang.
std::string where_threads_are(const Block& b);
// Ends every fiber of a failed block still suspended, each through its own stack.
void unwind_block(Running& r, Block& b) noexcept;
// The adversary's side of a barrier of block b (its stores become visible).
void adversary_barrier(Block& b);
// The adversary's side of resuming fiber f of block b (memory shows what its thread may see), and
// of its having been switched out (its plain stores since are taken from the watched pages).
void adversary_resuming(Block& b, Fiber& f);
// The adversary's side of a sync_warp() of lanes [base, base + lanes) of block b: it orders their
// memory accesses as a barrier orders the block's.
void adversary_warp_synced(Block& b, unsigned base, unsigned lanes);
void adversary_ran(Block& b, Fiber& f);

}  // namespace internal
}  // namespace tandem::sim
