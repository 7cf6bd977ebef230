#include "placement.hpp"

#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <new>

#if defined(__linux__)
#include <sched.h>
#endif

#include "tandem/environment.hpp"

namespace tandem::openmp {

namespace {

#if defined(__linux__)
std::atomic<bool> os_refused{false};  // a worker's sched_setaffinity failed: placement is off from then on
#endif

// "" where the workers are placed, else why not. The setting is read once (an invalid one throws
// each time, before anything changed); the OpenMP binding is fixed at start.
const std::string& refusal() {
  static const std::string why = []() -> std::string {
#if !defined(__linux__)
    return "off (not on Linux)";
#else
    if (env::choice("TANDEM_OPENMP_PLACEMENT", {"on", "off"}, "on") == "off") {
      return "off (TANDEM_OPENMP_PLACEMENT=off)";
    }
    if (omp_get_proc_bind() != omp_proc_bind_false || std::getenv("GOMP_CPU_AFFINITY") != nullptr) {
      return "off (the OpenMP runtime binds the threads: OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY)";
    }
    return "";
#endif
  }();
  return why;
}

#if defined(__linux__)
// A CPU set of the kernel's size (sched_getaffinity refuses a set smaller than its CPU count).
struct CpuSet {
  cpu_set_t* set = nullptr;
  std::size_t bytes = 0;
  int cpus = 0;
  explicit CpuSet(int n) : set(CPU_ALLOC(n)), bytes(CPU_ALLOC_SIZE(n)), cpus(n) {
    if (set == nullptr) throw std::bad_alloc();
    CPU_ZERO_S(bytes, set);
  }
  ~CpuSet() { CPU_FREE(set); }
  CpuSet(const CpuSet&) = delete;
  CpuSet& operator=(const CpuSet&) = delete;
};

// The calling thread's affinity in a set of `cpus` CPUs (0: the first size the kernel takes);
// nullptr where the kernel does not say.
std::unique_ptr<CpuSet> affinity(int cpus = 0) {
  for (int n = cpus > 0 ? cpus : 1024; n <= (1 << 20); n *= 2) {
    auto s = std::make_unique<CpuSet>(n);
    if (sched_getaffinity(0, s->bytes, s->set) == 0) return s;
    if (cpus > 0) break;
  }
  return nullptr;
}

// What the calling thread's workers were last told, and the team of its last op. Per calling
// thread: each thread that starts OpenMP regions has workers of its own (libgomp).
struct Placed {
  int cpu = -1;           // the CPU they avoid (-1: none yet)
  bool avoided = false;   // whether they were told to avoid it (not where the team outnumbers the CPUs)
  int caller_cpus = 0;    // the caller's CPUs then
  int threads = 0;        // the team of the last op
};
thread_local Placed placed;

// On a worker: the CPU this code last had it avoid (-1: none), so that a mask the application set
// itself is recognised and left alone.
thread_local int worker_avoids = -1;

// On a worker: its mask if it is the caller's CPUs, or those less the CPU this code last had it
// avoid; else (the application placed it) false.
bool ours_to_place(const CpuSet& caller) {
  const std::unique_ptr<CpuSet> now = affinity(caller.cpus);
  if (now == nullptr) return false;
  if (CPU_EQUAL_S(now->bytes, now->set, caller.set)) return true;
  if (worker_avoids < 0 || worker_avoids >= caller.cpus || !CPU_ISSET_S(worker_avoids, caller.bytes, caller.set)) {
    return false;
  }
  CPU_SET_S(worker_avoids, now->bytes, now->set);
  return CPU_EQUAL_S(now->bytes, now->set, caller.set);
}
#endif

}  // namespace

void keep_team_off_caller_cpu(int threads) {
#if defined(__linux__)
  if (omp_get_level() > 0 || !refusal().empty() || os_refused.load(std::memory_order_relaxed)) return;
  // libgomp ends the pool threads a smaller team of two or more leaves unused, and a larger team
  // starts new ones, with the caller's affinity: so a team larger than the last op's is placed
  // again.
  const int last = placed.threads;
  placed.threads = threads;
  if (threads < 2) return;
  const int cpu = sched_getcpu();
  if (cpu < 0) return;
  // Whether the workers should avoid the CPU turns on the team against the caller's CPUs then.
  const bool avoid = threads <= placed.caller_cpus;
  if (cpu == placed.cpu && threads <= last && avoid == placed.avoided) return;
  try {
    const std::unique_ptr<CpuSet> caller = affinity();
    placed.cpu = cpu;  // once per move, whatever happens below
    if (caller == nullptr || cpu >= caller->cpus || !CPU_ISSET_S(cpu, caller->bytes, caller->set)) return;
    const int count = CPU_COUNT_S(caller->bytes, caller->set);
    placed.caller_cpus = count;
    // A caller narrowed to fewer CPUs than the process started with has been placed by the
    // application, which then places its threads itself.
    if (count < omp_get_num_procs()) return;
    placed.avoided = threads <= count;  // more threads than CPUs share them anyway: every CPU
    CpuSet want(caller->cpus);
    CPU_OR_S(want.bytes, want.set, caller->set, caller->set);
    if (placed.avoided) CPU_CLR_S(cpu, want.bytes, want.set);
    const CpuSet& from = *caller;
    const int avoids = placed.avoided ? cpu : -1;
    std::atomic<int> done{0};
    std::atomic<bool> refused{false};
    const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
    {
      if (omp_get_thread_num() != 0) {
        bool ok = true;
        try {
          if (ours_to_place(from)) {
            ok = sched_setaffinity(0, want.bytes, want.set) == 0;  // this worker
            if (ok) worker_avoids = avoids;
          }
        } catch (const std::bad_alloc&) {
          // no memory for a CPU set: this worker stays as it was
        }
        if (!ok) refused.store(true, std::memory_order_relaxed);
        done.fetch_add(1, std::memory_order_release);
      } else {
        // Yielding, not spinning at the barrier: a worker woken onto this CPU runs only when this
        // thread gives it up, and leaves the CPU as its affinity changes.
        const int workers = omp_get_num_threads() - 1;
        while (done.load(std::memory_order_acquire) < workers &&
               std::chrono::steady_clock::now() - start < std::chrono::milliseconds(20)) {
          sched_yield();
        }
      }
    }
    if (refused.load()) os_refused.store(true);
  } catch (const std::bad_alloc&) {
    // No memory for a CPU set: the workers stay where they are; nothing else depends on it.
  }
#else
  (void)threads;
#endif
}

void forget_team_placement() {
#if defined(__linux__)
  placed.threads = 1;
#endif
}

std::string placement_description() {
#if defined(__linux__)
  if (refusal().empty() && os_refused.load()) return "off (the OS refused a worker's affinity)";
#endif
  return refusal().empty() ? "each op's team threads kept off the calling thread's CPU" : refusal();
}

}  // namespace tandem::openmp
