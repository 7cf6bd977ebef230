// The GPU simulator: runs GPU kernels written against tandem/gpu/kernel_api.hpp on the CPU.
//
// Blocks run in parallel on OS threads; the threads of a block run as fibers, so sync_threads()
// is a real barrier and warp exchanges meet all their lanes. Beyond what a GPU shows, it reports
// (as DeviceError naming kernel, block and thread): threads of a block at different barriers or
// exiting while others wait, warp exchanges that not every lane reaches or that read a lane that
// does not exist, writes past either end of a buffer (guard zones checked after each launch), and
// too much shared memory. Shared memory starts filled with 0xFF bytes (NaN for floats, -1 for
// integers) so reading an element no thread wrote poisons the result; thread order inside a block
// is shuffled per barrier round from a seed (TANDEM_SIM_SEED, else TANDEM_TEST_SEED, else random)
// so a missing barrier shows up as a wrong result. A thread that spins on a flag while nothing
// progresses fails after TANDEM_SIM_HANG_SECONDS, naming where it waits.
//
// The adversary (TANDEM_SIM_ADVERSARY=1, or launch_adversarial below) runs a launch as a GPU
// may: blocks in a random order with few resident, threads switched at every flag access, flag
// and plain stores seen late and flag loads returning old values unless fences, acquire/release or
// barriers order them, and a watchdog that names each waiting warp (backends/sim/sim_adversary.cpp).
//
// Running your own kernel on the simulator alone (tandem::launch in tandem/kernels.hpp runs it
// on every backend; docs/kernels.md):
//   TANDEM_KERNEL void my_kernel(int n, float* out) { ... gpu::thread_idx() ... }
//   tandem::Backend& sim = tandem::get_backend("sim");
//   tandem::sim::launch(sim, {"my_kernel", grid, block}, my_kernel, n, out_buffer.data<float>());
#pragma once

#include <atomic>
#include <bit>
#include <cstring>
#include <functional>
#include <source_location>
#include <tuple>
#include <type_traits>

#include "tandem/backend.hpp"
#include "tandem/gpu/types.hpp"

namespace tandem::sim {

// One launch under the adversary (TANDEM_SIM_ADVERSARY runs every launch so, with a seed drawn
// per launch): blocks in a random order, few resident, threads switched at every flag access,
// late stores and old loads where nothing orders them, and a watchdog.
struct AdversaryOptions {
  std::uint64_t seed = 0;  // the whole schedule: the same seed runs the launch the same way
  unsigned resident = 0;   // blocks resident at once; 0: 1 to 4, drawn from the seed
  std::uint64_t watchdog = std::uint64_t(1) << 20;  // flag accesses and warp exchanges with no progress: hung
  // Plain stores are watched (their pages made read-only) in one launch in this many, drawn from
  // the seed; 1: every launch, from its start. TANDEM_SIM_ADVERSARY watches one in 8, from the
  // launch's first flag access: a fault per thread and page is the dearest part of the adversary,
  // and a kernel runs many launches in the test matrix.
  unsigned plain_one_in = 1;
};

// A simulator backend's execution engine.
class Engine {
 public:
  virtual ~Engine() = default;
  // Runs thread_body once per GPU thread of the grid; returns when all are done. Throws
  // DeviceError for a failed check and rethrows what a kernel thread threw.
  virtual void run(const gpu::LaunchConfig& config, const std::function<void()>& thread_body) = 0;
  // The same under the adversary with these options.
  virtual void run_adversarial(const gpu::LaunchConfig& config, const std::function<void()>& thread_body,
                               const AdversaryOptions& options) = 0;
  virtual unsigned warp_size() const = 0;
  // The seed the thread order is shuffled from (for replaying a run).
  virtual std::uint64_t schedule_seed() const = 0;
};

// The engine of a simulator backend ("sim", "sim64"); InvalidArgument for any other backend.
Engine& engine_of(Backend& backend);

// Launches kernel(args...) on a simulator backend; arguments are converted to the kernel's
// parameter types once, and every GPU thread gets its own copy, as on a GPU.
template <class... P, class... A>
void launch(Backend& backend, const gpu::LaunchConfig& config, void (*kernel)(P...), A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "launch: wrong number of kernel arguments");
  const std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
  engine_of(backend).run(config, [&] { std::apply(kernel, params); });
}

// Runs thread_body once per GPU thread of the grid on a backend whose memory is the host's: on sim
// and sim64 their engine, with every check above; on the others (openmp, reference, a host
// Kokkos) the same fibers without the shuffled order, blocks spread over backend.host_parallel
// (openmp: its team). What tandem::launch (tandem/kernels.hpp) runs host-compiled kernels with.
void run_on_host(Backend& backend, const gpu::LaunchConfig& config, const std::function<void()>& thread_body);

// launch() under the adversary: a kernel that waits on other blocks, run with many seeds, shows
// whether it leans on an order, a visibility or a residency that a GPU does not promise.
template <class... P, class... A>
void launch_adversarial(Backend& backend, const AdversaryOptions& options, const gpu::LaunchConfig& config,
                        void (*kernel)(P...), A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "launch_adversarial: wrong number of kernel arguments");
  const std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
  engine_of(backend).run_adversarial(config, [&] { std::apply(kernel, params); }, options);
}

// ---- device side: what kernel_api.hpp maps to in simulator builds ----
enum class WarpOp { shfl, shfl_down, shfl_up, shfl_xor, ballot, any, all, sync };
std::uint64_t warp_exchange(WarpOp op, std::uint64_t bits, unsigned param, const std::source_location& where);
void* static_shared_slot(const void* site, std::size_t bytes, std::size_t align);
// Called every few thousand flag loads of a spinning thread: throws when another block of the
// launch has failed (a block spinning on a flag that the failed block would have set ends instead
// of hanging), or when no block has made progress for TANDEM_SIM_HANG_SECONDS (a hang, named).
void spin_check(const std::source_location& where);
// A flag store or an atomic: progress that a spinning block may be waiting for.
void note_progress();
inline thread_local unsigned volatile_loads = 0;
void* dynamic_shared();
// A GPU faults on a wide access (a 16-byte pack, a 32-bit pair of halves) at an address that is
// not a multiple of its width; the simulator copies bytes, so kernel helpers call this instead.
[[noreturn]] void misaligned(const void* p, std::size_t bytes, const char* what);

// The adversary (TANDEM_SIM_ADVERSARY=1, sim_adversary.cpp): while it runs a launch, every flag
// access, atomic and fence below goes through it. It is a place where the fiber may be switched
// out, and a memory model: a store waits in a buffer until a fence, a release, a barrier or a
// random delay makes it visible to other blocks; a load may return an older value of the address
// than the newest one, never older than what this thread's fences, acquires and earlier reads of
// it have shown. Plain C++ stores to the simulator's buffers are seen through their pages and
// buffered per thread: until their thread fences or releases, memory shows another thread the
// bytes from before them, to its plain loads and flag loads alike (backends/sim/sim_plain.hpp).
enum class Scope : unsigned char { block, device, system };
inline thread_local bool adversarial = false;  // this OS thread runs an adversarial launch
std::uint64_t adversary_load(const void* p, std::size_t bytes, bool acquire, const std::source_location& where);
void adversary_store(void* p, std::size_t bytes, std::uint64_t bits, bool release, const std::source_location& where);
void adversary_fence(Scope scope, const std::source_location& where);
// Around an atomic read-modify-write of p (which acts on the newest value, as on a GPU).
void adversary_rmw_begin(void* p, std::size_t bytes, const std::source_location& where);
void adversary_rmw_end(void* p, std::size_t bytes);

template <class T>
std::uint64_t to_flag_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "flag accesses move up to 8 bytes");
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <class T>
T from_flag_bits(std::uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

template <class T>
T& static_shared(const void* site) {
  static_assert(std::is_trivially_default_constructible_v<T>, "shared memory holds trivial types only");
  return *static_cast<T*>(static_shared_slot(site, sizeof(T), alignof(T)));
}

}  // namespace tandem::sim

namespace tandem::gpu {

Dim3 thread_idx();
Dim3 block_idx();
Dim3 block_dim();
Dim3 grid_dim();
unsigned warp_size();
void sync_threads(const std::source_location& where = std::source_location::current());
inline void sync_warp(const std::source_location& where = std::source_location::current()) {
  sim::warp_exchange(sim::WarpOp::sync, 0, 0, where);
}
inline void thread_fence(const std::source_location& w = std::source_location::current()) {
  if (sim::adversarial) return sim::adversary_fence(sim::Scope::device, w);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline void thread_fence_block(const std::source_location& w = std::source_location::current()) {
  if (sim::adversarial) return sim::adversary_fence(sim::Scope::block, w);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline void thread_fence_system(const std::source_location& w = std::source_location::current()) {
  if (sim::adversarial) return sim::adversary_fence(sim::Scope::system, w);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
// 1 + the index of the lowest set bit of m, 0 when m is 0 (as CUDA's __ffsll).
inline unsigned find_first_set(lane_mask m) { return m == 0 ? 0u : static_cast<unsigned>(std::countr_zero(m)) + 1; }

namespace sim_detail {
template <class T>
T exchange(sim::WarpOp op, T v, unsigned param, const std::source_location& where) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "warp exchanges move up to 8 bytes");
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = sim::warp_exchange(op, bits, param, where);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}
}  // namespace sim_detail

template <class T>
T shfl(T v, unsigned src, const std::source_location& w = std::source_location::current()) {
  return sim_detail::exchange(sim::WarpOp::shfl, v, src, w);
}
template <class T>
T shfl_down(T v, unsigned d, const std::source_location& w = std::source_location::current()) {
  return sim_detail::exchange(sim::WarpOp::shfl_down, v, d, w);
}
template <class T>
T shfl_up(T v, unsigned d, const std::source_location& w = std::source_location::current()) {
  return sim_detail::exchange(sim::WarpOp::shfl_up, v, d, w);
}
template <class T>
T shfl_xor(T v, unsigned m, const std::source_location& w = std::source_location::current()) {
  return sim_detail::exchange(sim::WarpOp::shfl_xor, v, m, w);
}
inline lane_mask ballot(bool p, const std::source_location& w = std::source_location::current()) {
  return sim::warp_exchange(sim::WarpOp::ballot, p ? 1 : 0, 0, w);
}
inline bool any(bool p, const std::source_location& w = std::source_location::current()) {
  return sim::warp_exchange(sim::WarpOp::any, p ? 1 : 0, 0, w) != 0;
}
inline bool all(bool p, const std::source_location& w = std::source_location::current()) {
  return sim::warp_exchange(sim::WarpOp::all, p ? 1 : 0, 0, w) != 0;
}

// Atomics: real ones, since blocks run on several OS threads. Under the adversary each is a point
// where the fiber may be switched out, and acts on the newest value.
namespace sim_detail {
template <class T, class F>
T rmw(T* p, const std::source_location& w, F&& f) {
  if (sim::adversarial) sim::adversary_rmw_begin(p, sizeof(T), w);
  const T old = f(std::atomic_ref<T>(*p));
  if (sim::adversarial) {
    sim::adversary_rmw_end(p, sizeof(T));
  } else {
    sim::note_progress();
  }
  return old;
}
}  // namespace sim_detail
template <class T>
T atomic_add(T* p, T v, const std::source_location& w = std::source_location::current()) {
  return sim_detail::rmw(p, w, [&](std::atomic_ref<T> a) { return a.fetch_add(v); });
}
inline int atomic_max(int* p, int v, const std::source_location& w = std::source_location::current()) {
  return sim_detail::rmw(p, w, [&](std::atomic_ref<int> a) {
    int old = a.load();
    while (old < v && !a.compare_exchange_weak(old, v)) {
    }
    return old;
  });
}
inline int atomic_min(int* p, int v, const std::source_location& w = std::source_location::current()) {
  return sim_detail::rmw(p, w, [&](std::atomic_ref<int> a) {
    int old = a.load();
    while (old > v && !a.compare_exchange_weak(old, v)) {
    }
    return old;
  });
}
inline unsigned atomic_cas(unsigned* p, unsigned expected, unsigned desired,
                           const std::source_location& w = std::source_location::current()) {
  return sim_detail::rmw(p, w, [&](std::atomic_ref<unsigned> a) {
    a.compare_exchange_strong(expected, desired);
    return expected;
  });
}
// Flag accesses: relaxed (volatile), or acquire / release at device scope.
template <class T>
T load_volatile(const T* p, const std::source_location& w = std::source_location::current()) {
  if (sim::adversarial) return sim::from_flag_bits<T>(sim::adversary_load(p, sizeof(T), false, w));
  if ((++sim::volatile_loads & 4095u) == 0) sim::spin_check(w);
  return std::atomic_ref<T>(*const_cast<T*>(p)).load(std::memory_order_acquire);
}
template <class T>
void store_volatile(T* p, T v, const std::source_location& w = std::source_location::current()) {
  if (sim::adversarial) return sim::adversary_store(p, sizeof(T), sim::to_flag_bits(v), false, w);
  std::atomic_ref<T>(*p).store(v, std::memory_order_release);
  sim::note_progress();
}
template <class T>
T load_acquire(const T* p, const std::source_location& w = std::source_location::current()) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "load_acquire: 4- or 8-byte types");
  if (sim::adversarial) return sim::from_flag_bits<T>(sim::adversary_load(p, sizeof(T), true, w));
  if ((++sim::volatile_loads & 4095u) == 0) sim::spin_check(w);
  return std::atomic_ref<T>(*const_cast<T*>(p)).load(std::memory_order_acquire);
}
template <class T>
void store_release(T* p, T v, const std::source_location& w = std::source_location::current()) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "store_release: 4- or 8-byte types");
  if (sim::adversarial) return sim::adversary_store(p, sizeof(T), sim::to_flag_bits(v), true, w);
  std::atomic_ref<T>(*p).store(v, std::memory_order_release);
  sim::note_progress();
}

}  // namespace tandem::gpu
