#include "placement.hpp"

#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>

#if defined(__linux__)
#include <sched.h>
#endif

#include "tandem/environment.hpp"

namespace tandem::openmp {

namespace {

// "" where the workers are placed, else why not (read once: the OpenMP settings are fixed at start).
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
  explicit CpuSet(int n) : set(CPU_ALLOC(n)), bytes(CPU_ALLOC_SIZE(n)), cpus(n) {}
  ~CpuSet() { CPU_FREE(set); }
  CpuSet(const CpuSet&) = delete;
  CpuSet& operator=(const CpuSet&) = delete;
};

// The calling thread's affinity (nullptr where the kernel does not say).
std::unique_ptr<CpuSet> caller_cpus() {
  for (int n = 1024; n <= (1 << 20); n *= 2) {
    auto s = std::make_unique<CpuSet>(n);
    if (s->set == nullptr) return nullptr;
    if (sched_getaffinity(0, s->bytes, s->set) == 0) return s;
  }
  return nullptr;
}

// The CPU the calling thread's workers were last told to avoid (-1: none yet) and the team of its
// last op. Per calling thread: each thread that starts OpenMP regions has workers of its own.
struct Placed {
  int cpu = -1;
  int threads = 0;
};
thread_local Placed placed;
#endif

}  // namespace

void keep_team_off_caller_cpu(int threads) {
#if defined(__linux__)
  if (omp_in_parallel() || !refusal().empty()) return;
  // libgomp ends the pool threads a smaller team of two or more leaves unused, and a larger team
  // starts new ones, with the caller's affinity: so a team larger than the last op's is placed
  // again.
  const int last = placed.threads;
  placed.threads = threads;
  if (threads < 2) return;
  const int cpu = sched_getcpu();
  if (cpu < 0 || (cpu == placed.cpu && threads <= last)) return;
  placed.cpu = cpu;  // once per move, whatever happens below
  const std::unique_ptr<CpuSet> cpus = caller_cpus();
  if (cpus == nullptr || cpu >= cpus->cpus) return;
  // More threads than the caller's CPUs share them anyway: then the workers take every one (set
  // back if an earlier, smaller team had them avoid one).
  if (threads <= CPU_COUNT_S(cpus->bytes, cpus->set) && CPU_ISSET_S(cpu, cpus->bytes, cpus->set)) {
    CPU_CLR_S(cpu, cpus->bytes, cpus->set);
  }
  const cpu_set_t* set = cpus->set;
  const std::size_t bytes = cpus->bytes;
  std::atomic<int> done{0};
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
  {
    if (omp_get_thread_num() != 0) {
      sched_setaffinity(0, bytes, set);  // this worker (best effort: a refusal leaves it as it was)
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
#else
  (void)threads;
#endif
}

std::string placement_description() {
  return refusal().empty() ? "each op's team threads kept off the calling thread's CPU" : refusal();
}

}  // namespace tandem::openmp
