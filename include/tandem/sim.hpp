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
// so a missing barrier shows up as a wrong result.
//
// Running your own kernel (see README, "The simulator"):
//   TANDEM_KERNEL void my_kernel(int n, float* out) { ... gpu::thread_idx() ... }
//   tandem::Backend& sim = tandem::get_backend("sim");
//   tandem::sim::launch(sim, {"my_kernel", grid, block}, my_kernel, n, out_buffer.data<float>());
#pragma once

#include <atomic>
#include <cstring>
#include <functional>
#include <source_location>
#include <tuple>
#include <type_traits>

#include "tandem/backend.hpp"
#include "tandem/gpu/types.hpp"

namespace tandem::sim {

// A simulator backend's execution engine.
class Engine {
 public:
  virtual ~Engine() = default;
  // Runs thread_body once per GPU thread of the grid; returns when all are done. Throws
  // DeviceError for a failed check and rethrows what a kernel thread threw.
  virtual void run(const gpu::LaunchConfig& config, const std::function<void()>& thread_body) = 0;
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

// ---- device side: what kernel_api.hpp maps to in simulator builds ----
enum class WarpOp { shfl, shfl_down, shfl_up, shfl_xor, ballot, any, all, sync };
std::uint64_t warp_exchange(WarpOp op, std::uint64_t bits, unsigned param, const std::source_location& where);
void* static_shared_slot(const void* site, std::size_t bytes, std::size_t align);
// Throws when another block of the launch has failed: a block spinning on a flag that the failed
// block would have set (a look-back, a lock) ends instead of hanging.
void check_abort();
inline thread_local unsigned volatile_loads = 0;
void* dynamic_shared();
// A GPU faults on a wide access (a 16-byte pack, a 32-bit pair of halves) at an address that is
// not a multiple of its width; the simulator copies bytes, so kernel helpers call this instead.
[[noreturn]] void misaligned(const void* p, std::size_t bytes, const char* what);

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
inline void thread_fence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

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

// Atomics: real ones, since blocks run on several OS threads.
template <class T>
T atomic_add(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_add(v);
}
inline int atomic_max(int* p, int v) {
  std::atomic_ref<int> a(*p);
  int old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
inline int atomic_min(int* p, int v) {
  std::atomic_ref<int> a(*p);
  int old = a.load();
  while (old > v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
inline unsigned atomic_cas(unsigned* p, unsigned expected, unsigned desired) {
  std::atomic_ref<unsigned>(*p).compare_exchange_strong(expected, desired);
  return expected;
}
template <class T>
T load_volatile(const T* p) {
  if ((++sim::volatile_loads & 4095u) == 0) sim::check_abort();
  return std::atomic_ref<T>(*const_cast<T*>(p)).load(std::memory_order_acquire);
}
template <class T>
void store_volatile(T* p, T v) {
  std::atomic_ref<T>(*p).store(v, std::memory_order_release);
}

}  // namespace tandem::gpu
