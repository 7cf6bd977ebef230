// The portability header every GPU kernel is written against: one kernel source, three compilers.
// nvcc (CUDA) and clang -x hip (HIP) see the vendor built-ins; the host C++ compiler sees the
// simulator (tandem/sim.hpp), which runs the same kernels on the CPU with extra checks.
//
// Rules for kernel code (ARCHITECTURE.md, "One GPU kernel source, three compilers"):
//  - indices through gpu::thread_idx(), block_idx(), block_dim(), grid_dim(); barriers through
//    gpu::sync_threads(); warp exchanges through gpu::shfl_*(), ballot(), any(), all();
//  - never assume a warp of 32: read gpu::warp_size(); lane masks are 64-bit (gpu::lane_mask);
//  - every thread of a block reaches every barrier, and every lane of a warp every warp exchange
//    (the simulator reports divergence); size per-warp shared arrays for the smallest warp (32);
//  - shared memory through TANDEM_SHARED(type, name, [dims]) and TANDEM_DYNAMIC_SHARED(type, name);
//  - launch through tandem::launch (tandem/kernels.hpp: every backend) or, in the library, the
//    GPU runtime's launch helper; never <<<...>>>.
#pragma once

#include <cstring>
#include <type_traits>

#include "tandem/gpu/types.hpp"

#if defined(TANDEM_GPU_COMPILER)

#define TANDEM_KERNEL __global__
// The most threads a block of this kernel has: lets the compiler give each thread more registers.
// An optional second argument: the blocks a multiprocessor must hold at once (CUDA's meaning).
#define TANDEM_LAUNCH_BOUNDS(...) __launch_bounds__(__VA_ARGS__)
#define TANDEM_DEVICE __device__ __forceinline__
// Unroll the next loop fully (its trip count a constant): keeps register arrays it indexes in
// registers instead of local memory.
#define TANDEM_UNROLL _Pragma("unroll")
#define TANDEM_SHARED(type, name, ...) __shared__ type name __VA_ARGS__
#define TANDEM_DYNAMIC_SHARED(type, name)                                                \
  extern __shared__ __attribute__((aligned(16))) unsigned char tandem_dynamic_shared_[]; \
  type* name = reinterpret_cast<type*>(tandem_dynamic_shared_)

namespace tandem::gpu {

TANDEM_DEVICE Dim3 thread_idx() { return {threadIdx.x, threadIdx.y, threadIdx.z}; }
TANDEM_DEVICE Dim3 block_idx() { return {blockIdx.x, blockIdx.y, blockIdx.z}; }
TANDEM_DEVICE Dim3 block_dim() { return {blockDim.x, blockDim.y, blockDim.z}; }
TANDEM_DEVICE Dim3 grid_dim() { return {gridDim.x, gridDim.y, gridDim.z}; }
TANDEM_DEVICE unsigned warp_size() { return static_cast<unsigned>(warpSize); }
TANDEM_DEVICE void sync_threads() { __syncthreads(); }
// Fences, by scope: orders this thread's earlier memory accesses before its later ones as seen by
// the threads of its block, of the device, or of the system (host and peers).
TANDEM_DEVICE void thread_fence_block() { __threadfence_block(); }
TANDEM_DEVICE void thread_fence() { __threadfence(); }
TANDEM_DEVICE void thread_fence_system() { __threadfence_system(); }
// 1 + the index of the lowest set bit of m, 0 when m is 0. Not std::countr_zero: nvcc folds the
// host builtin behind it to the bit width in device code (it returned 64 for every mask).
TANDEM_DEVICE unsigned find_first_set(lane_mask m) {
  return static_cast<unsigned>(__ffsll(static_cast<long long>(m)));
}

#if defined(TANDEM_HIP)
// HIP 5.2 has no *_sync warp functions: a wavefront runs in lock-step.
TANDEM_DEVICE void sync_warp() {}
template <class T>
TANDEM_DEVICE T shfl(T v, unsigned src) {
  return __shfl(v, static_cast<int>(src));
}
template <class T>
TANDEM_DEVICE T shfl_down(T v, unsigned delta) {
  return __shfl_down(v, delta);
}
template <class T>
TANDEM_DEVICE T shfl_up(T v, unsigned delta) {
  return __shfl_up(v, delta);
}
template <class T>
TANDEM_DEVICE T shfl_xor(T v, unsigned mask) {
  return __shfl_xor(v, static_cast<int>(mask));
}
TANDEM_DEVICE lane_mask ballot(bool p) { return static_cast<lane_mask>(__ballot(p)); }
TANDEM_DEVICE bool any(bool p) { return __any(p) != 0; }
TANDEM_DEVICE bool all(bool p) { return __all(p) != 0; }
#else
TANDEM_DEVICE void sync_warp() { __syncwarp(); }
template <class T>
TANDEM_DEVICE T shfl(T v, unsigned src) {
  return __shfl_sync(0xffffffffu, v, static_cast<int>(src));
}
template <class T>
TANDEM_DEVICE T shfl_down(T v, unsigned delta) {
  return __shfl_down_sync(0xffffffffu, v, delta);
}
template <class T>
TANDEM_DEVICE T shfl_up(T v, unsigned delta) {
  return __shfl_up_sync(0xffffffffu, v, delta);
}
template <class T>
TANDEM_DEVICE T shfl_xor(T v, unsigned mask) {
  return __shfl_xor_sync(0xffffffffu, v, static_cast<int>(mask));
}
TANDEM_DEVICE lane_mask ballot(bool p) { return static_cast<lane_mask>(__ballot_sync(0xffffffffu, p)); }
TANDEM_DEVICE bool any(bool p) { return __any_sync(0xffffffffu, p) != 0; }
TANDEM_DEVICE bool all(bool p) { return __all_sync(0xffffffffu, p) != 0; }
#endif

template <class T>
TANDEM_DEVICE T atomic_add(T* p, T v) {
  return atomicAdd(p, v);
}
TANDEM_DEVICE int atomic_max(int* p, int v) { return atomicMax(p, v); }
TANDEM_DEVICE int atomic_min(int* p, int v) { return atomicMin(p, v); }
TANDEM_DEVICE unsigned atomic_cas(unsigned* p, unsigned expected, unsigned desired) {
  return atomicCAS(p, expected, desired);
}
// Loads and stores that other blocks' writes and reads see (flags between blocks; pair with
// thread_fence()). In the PTX memory model these are relaxed accesses at system scope: they are
// not ordered with this thread's other accesses without a fence.
template <class T>
TANDEM_DEVICE T load_volatile(const T* p) {
  return *static_cast<const volatile T*>(p);
}
template <class T>
TANDEM_DEVICE void store_volatile(T* p, T v) {
  *static_cast<volatile T*>(p) = v;
}
// Acquire loads and release stores at device scope, of 4- or 8-byte T: a load that reads what a
// release store wrote sees every access the writer made before that store.
template <class T>
TANDEM_DEVICE T load_acquire(const T* p) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "load_acquire: 4- or 8-byte types");
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  U bits;
#if defined(TANDEM_HIP)
  bits = __hip_atomic_load(reinterpret_cast<const U*>(p), __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_AGENT);
#else
  if constexpr (sizeof(T) == 4) {
    asm volatile("ld.acquire.gpu.b32 %0, [%1];" : "=r"(bits) : "l"(p) : "memory");
  } else {
    asm volatile("ld.acquire.gpu.b64 %0, [%1];" : "=l"(bits) : "l"(p) : "memory");
  }
#endif
  T v;
  __builtin_memcpy(&v, &bits, sizeof v);
  return v;
}
template <class T>
TANDEM_DEVICE void store_release(T* p, T v) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "store_release: 4- or 8-byte types");
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  U bits;
  __builtin_memcpy(&bits, &v, sizeof bits);
#if defined(TANDEM_HIP)
  __hip_atomic_store(reinterpret_cast<U*>(p), bits, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_AGENT);
#else
  if constexpr (sizeof(T) == 4) {
    asm volatile("st.release.gpu.b32 [%0], %1;" ::"l"(p), "r"(bits) : "memory");
  } else {
    asm volatile("st.release.gpu.b64 [%0], %1;" ::"l"(p), "l"(bits) : "memory");
  }
#endif
}

}  // namespace tandem::gpu

#else  // the simulator

#include "tandem/sim.hpp"

#define TANDEM_KERNEL
#define TANDEM_LAUNCH_BOUNDS(...)
#define TANDEM_DEVICE inline
#define TANDEM_UNROLL
// Every declaration site owns one slot of the block's shared memory, found by its address.
#define TANDEM_SHARED(type, name, ...) \
  static char name##_site_;            \
  auto& name = ::tandem::sim::static_shared<type __VA_ARGS__>(&name##_site_)
#define TANDEM_DYNAMIC_SHARED(type, name) type* name = static_cast<type*>(::tandem::sim::dynamic_shared())

#endif

namespace tandem::gpu {
// Linear thread index within the block, its lane and its warp.
TANDEM_DEVICE unsigned thread_rank() {
  const Dim3 t = thread_idx(), b = block_dim();
  return t.x + b.x * (t.y + b.y * t.z);
}
TANDEM_DEVICE unsigned block_threads() {
  const Dim3 b = block_dim();
  return b.x * b.y * b.z;
}
TANDEM_DEVICE unsigned lane_id() { return thread_rank() % warp_size(); }
TANDEM_DEVICE unsigned warp_id() { return thread_rank() / warp_size(); }
}  // namespace tandem::gpu
