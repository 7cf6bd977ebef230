// What a Hopper (sm_90) kernel uses to feed its tiles: mbarriers in shared memory and
// tensor-memory-access (TMA) copies of 2D boxes from global memory, which complete on an mbarrier
// by transaction bytes. Under nvcc for sm_90 or newer, each function is its PTX instruction; in a
// simulator build it is the simulator's model of it (backends/sim/sim_hopper.hpp), which checks
// what the hardware leaves undefined. NVIDIA only: HIP has neither.
//
// The pattern (a producer fills stages that consumers read):
//   init:     one thread: mbarrier_init(&full[s], 1), mbarrier_init(&empty[s], consumers);
//             fence_mbarrier_init(); then sync_threads()
//   producer: wait_parity(&empty[s], phase ^ 1); arrive_expect_tx(&full[s], bytes);
//             tma_load_2d(tile[s], map, x, y, &full[s])
//   consumer: wait_parity(&full[s], phase); read tile[s]; mbarrier_arrive(&empty[s])
// where phase flips each time the stage index wraps around.
#pragma once

#include <cstdint>

#include "tandem/gpu/kernel_api.hpp"

#if defined(TANDEM_HIP)
#error "backends/gpu/kernels/hopper.hpp: mbarriers and TMA copies are NVIDIA sm_90 features; HIP has neither"
#elif defined(TANDEM_GPU_COMPILER)
#include <cuda.h>  // CUtensorMap (the type only: the host encodes it through the runtime's driver entry point)
#else
#include "../../sim/sim_hopper.hpp"
#endif

namespace tandem::gpu::kernels {
inline namespace TANDEM_GPU_ABI {

#if defined(TANDEM_GPU_COMPILER)
// A tensor map must live in kernel parameters (or constant or global memory): take it as a
// `TANDEM_GRID_CONSTANT const TensorMap` parameter and pass its address.
using TensorMap = CUtensorMap;
#define TANDEM_GRID_CONSTANT __grid_constant__
#else
using TensorMap = sim::TensorMap2D;
#define TANDEM_GRID_CONSTANT
#endif

// The caller's place in the source, for the simulator's reports (nothing under nvcc).
#if defined(TANDEM_GPU_COMPILER)
#define TANDEM_SIM_WHERE
#define TANDEM_SIM_WHERE_ONLY
#else
#define TANDEM_SIM_WHERE , const std::source_location& w = std::source_location::current()
#define TANDEM_SIM_WHERE_ONLY const std::source_location& w = std::source_location::current()
#endif

// An mbarrier: 8 bytes of shared memory, 8-byte aligned.
struct alignas(8) MBarrier {
  std::uint64_t state;
};

#if defined(TANDEM_GPU_COMPILER)
TANDEM_DEVICE std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define TANDEM_SM90(...) __VA_ARGS__
#else
#define TANDEM_SM90(...) __trap()  // never launched there: the backend offers Hopper kernels on sm_90 only
#endif
#endif

// Starts bar's phase 0 expecting `arrivals` arrivals (1 to 2^20 - 1). One thread; then
// fence_mbarrier_init() and a sync_threads() before any other thread or a TMA copy uses it.
TANDEM_DEVICE void mbarrier_init(MBarrier* bar, std::uint32_t arrivals TANDEM_SIM_WHERE) {
#if defined(TANDEM_GPU_COMPILER)
  TANDEM_SM90(asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(arrivals)
                           : "memory"));
#else
  sim::mbarrier_init(bar, arrivals, w);
#endif
}

// Makes the mbarriers this thread initialized visible to the TMA unit (the async proxy).
TANDEM_DEVICE void fence_mbarrier_init(TANDEM_SIM_WHERE_ONLY) {
#if defined(TANDEM_GPU_COMPILER)
  TANDEM_SM90(asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"));
#else
  sim::fence_mbarrier_init(w);
#endif
}

// Orders this thread's earlier generic-proxy accesses to shared memory before later async-proxy
// ones (a TMA copy into a stage this thread read or wrote).
TANDEM_DEVICE void fence_proxy_async_shared(TANDEM_SIM_WHERE_ONLY) {
#if defined(TANDEM_GPU_COMPILER)
  TANDEM_SM90(asm volatile("fence.proxy.async.shared::cta;" ::: "memory"));
#else
  sim::fence_mbarrier_init(w);  // it orders the inits before the async proxy too
#endif
}

// One arrival on bar (release: this thread's earlier accesses happen before the phase completes).
TANDEM_DEVICE void mbarrier_arrive(MBarrier* bar TANDEM_SIM_WHERE) {
#if defined(TANDEM_GPU_COMPILER)
  TANDEM_SM90(
      asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared::cta.b64 state, [%0];\n}" ::"r"(shared_address(bar))
                   : "memory"));
#else
  sim::mbarrier_arrive(bar, 0, w);
#endif
}

// Expects `bytes` more transaction bytes in bar's current phase, then arrives.
TANDEM_DEVICE void mbarrier_arrive_expect_tx(MBarrier* bar, std::uint32_t bytes TANDEM_SIM_WHERE) {
#if defined(TANDEM_GPU_COMPILER)
  TANDEM_SM90(asm volatile(
      "{\n .reg .b64 state;\n mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}" ::"r"(shared_address(bar)),
      "r"(bytes)
      : "memory"));
#else
  sim::mbarrier_arrive(bar, bytes, w);
#endif
}

// Whether bar's phase of parity `parity` (0 or 1) has completed (acquire when it has).
TANDEM_DEVICE bool mbarrier_try_wait_parity(MBarrier* bar, std::uint32_t parity TANDEM_SIM_WHERE) {
#if defined(TANDEM_GPU_COMPILER)
  std::uint32_t done = 0;
  TANDEM_SM90(asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
      : "=r"(done)
      : "r"(shared_address(bar)), "r"(parity)
      : "memory"));
  return done != 0;
#else
  return sim::mbarrier_try_wait_parity(bar, parity, w);
#endif
}

// Waits until bar's phase of parity `parity` has completed.
TANDEM_DEVICE void mbarrier_wait_parity(MBarrier* bar, std::uint32_t parity TANDEM_SIM_WHERE) {
#if defined(TANDEM_GPU_COMPILER)
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
#else
  while (!sim::mbarrier_try_wait_parity(bar, parity, w)) {
  }
#endif
}

// Copies the box at element (x, y) (x along the contiguous dimension; negative or past the edge
// reads zeros) of the map's tensor into shared memory at dst (128-byte aligned; 1024 for the
// 128-byte swizzle to start its pattern at the box), completing the box's bytes on bar. One thread.
TANDEM_DEVICE void tma_load_2d(void* dst, const TensorMap* map, std::int32_t x, std::int32_t y,
                               MBarrier* bar TANDEM_SIM_WHERE) {
#if defined(TANDEM_GPU_COMPILER)
  TANDEM_SM90(asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::
          "r"(shared_address(dst)),
      "l"(map), "r"(x), "r"(y), "r"(shared_address(bar))
      : "memory"));
#else
  sim::tma_load_2d(dst, *map, x, y, bar, w);
#endif
}

}  // namespace TANDEM_GPU_ABI
}  // namespace tandem::gpu::kernels
