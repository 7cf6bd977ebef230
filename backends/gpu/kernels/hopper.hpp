// What a Hopper (sm_90) kernel uses to feed and multiply its tiles: mbarriers in shared memory,
// tensor-memory-access (TMA) copies of 2D boxes from global memory, which complete on an mbarrier
// by transaction bytes, and the warpgroup's asynchronous matrix multiply (wgmma, sm_90a). Under nvcc for sm_90 or
// newer, each function is its PTX instruction; in a simulator build it is the simulator's model of it
// (backends/sim/sim_hopper.hpp), which checks what the hardware leaves undefined. NVIDIA only: HIP has neither.
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
#include <type_traits>

#include "tandem/dtype.hpp"
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

// A warpgroup, which wgmma spreads its tile over: four warps of NVIDIA's 32 lanes (the backends
// offer wgmma only where warps are that wide; the simulator refuses it on sim64).
inline constexpr unsigned kWarpgroupThreads = 128, kWarpgroupWarps = 4;

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

// Where p lies in the block's shared memory window (cvta.to.shared): what a swizzle's pattern and
// a wgmma descriptor are reckoned from.
TANDEM_DEVICE std::uint32_t shared_window(const void* p TANDEM_SIM_WHERE) {
#if defined(TANDEM_GPU_COMPILER)
  return shared_address(p);
#else
  return sim::shared_window_address(p, w);
#endif
}

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

// ---- wgmma: the warpgroup's asynchronous matrix multiply (sm_90a) ----
// The 128 threads of a warpgroup (four consecutive warps, the first a multiple of four) multiply
// A (64 x 16) by B (16 x N), 16-bit elements in shared memory (wgmma_descriptor's layouts), into
// a 64 x N f32 accumulator spread over their registers: warp w holds rows 16w..16w + 15, lane l
// the rows 16w + l / 4 (+ 8 in d[4j + 2], d[4j + 3]) and columns 8j + 2 (l % 4) (+ 1 in
// d[4j + 1], d[4j + 3]). Issue: wgmma_fence(), then the wgmmas of a step, wgmma_commit_group();
// their accumulators and operands are the hardware's until wgmma_wait_group<P>() leaves at most
// P groups in flight.

// A shared-memory operand for wgmma: the k16 slice of A (64 rows) or B (N columns) starting at
// `tile`, in one of PTX's canonical layouts.
//  - K-major (A as it is, B transposed): rows of the operand with K contiguous. Swizzled (32, 64
//    or 128 bytes, as a TMA copy with that swizzle lays a box of rows that wide out), each 8-row
//    group is `stride` bytes on from the last (8 rows of the swizzle's width: 256, 512, 1024);
//    unswizzled, rows are 8 x 16-byte core matrices, `leading` bytes apart along K and `stride`
//    apart along the rows. A K step of 16 within a swizzled row adds 32 bytes to `tile`.
//  - M/N-major (wgmma_async's TransA/TransB: A transposed, B as it is): rows of K, M or N
//    contiguous. Swizzled, each k row is the swizzle's width of M/N (a TMA box that wide, its
//    rows along K), 8-row groups of k `stride` bytes apart (8 rows of the width) and each
//    width-long run of M/N `leading` bytes on (the next box); unswizzled, core matrices of 8 k
//    rows by 8 elements (16 bytes), `leading` bytes apart along K and `stride` along M/N. A K step
//    of 16 adds 16 rows to `tile`.
// `tile` of a 128B-swizzled operand sits at a multiple of 1024 bytes plus the K step's bytes.
TANDEM_DEVICE std::uint64_t wgmma_descriptor(const void* tile, Swizzle swizzle, std::uint32_t leading,
                                             std::uint32_t stride TANDEM_SIM_WHERE) {
#if defined(TANDEM_GPU_COMPILER)
  const std::uint64_t start = shared_window(tile);
#else
  const std::uint64_t start = shared_window(tile, w);
#endif
  const std::uint64_t mode = swizzle == Swizzle::bytes128  ? 1
                             : swizzle == Swizzle::bytes64 ? 2
                             : swizzle == Swizzle::bytes32 ? 3
                                                           : 0;
  return ((start & 0x3FFFF) >> 4) | (std::uint64_t((leading & 0x3FFFF) >> 4) << 16) |
         (std::uint64_t((stride & 0x3FFFF) >> 4) << 32) | (mode << 62);
}

#if defined(TANDEM_GPU_COMPILER) && defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TANDEM_SM90A(...) __trap()  // wgmma exists in sm_90a code only (CMAKE_CUDA_ARCHITECTURES=90a)
#else
#define TANDEM_SM90A(...) __VA_ARGS__
#endif

// setmaxnreg (sm_90a): every thread of this warpgroup moves to `Registers` registers a thread
// (24 to 256, a multiple of 8), lowering (a producer that needs few) or raising (consumers holding
// accumulators) its share of the multiprocessor's registers; a raise waits until others have
// lowered theirs. Executed by all the warpgroup's threads. The simulator has no register file: a
// no-op there.
enum class RegisterTrade { lower, raise };
template <RegisterTrade Trade, unsigned Registers>
TANDEM_DEVICE void warpgroup_registers() {
  static_assert(Registers >= 24 && Registers <= 256 && Registers % 8 == 0, "setmaxnreg takes 24..256, by 8");
#if defined(TANDEM_GPU_COMPILER)
  if constexpr (Trade == RegisterTrade::lower) {
    TANDEM_SM90A(asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Registers)));
  } else {
    TANDEM_SM90A(asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Registers)));
  }
#endif
}

// Orders this thread's register accesses before the wgmmas that follow (wgmma.fence).
TANDEM_DEVICE void wgmma_fence() {
#if defined(TANDEM_GPU_COMPILER)
  TANDEM_SM90A(asm volatile("wgmma.fence.sync.aligned;" ::: "memory"));
#endif
}

// Keeps the compiler from moving this thread's own reads and writes of d across the wgmma calls
// around it: the multiplies name d, the fences and waits do not. Call it before wgmma_fence and
// after each wait.
template <unsigned N>
TANDEM_DEVICE void wgmma_fence_operands(float (&d)[N]) {
#if defined(TANDEM_GPU_COMPILER)
  TANDEM_UNROLL
  for (unsigned i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
#else
  (void)d;
#endif
}

TANDEM_DEVICE void wgmma_commit_group(TANDEM_SIM_WHERE_ONLY) {
#if defined(TANDEM_GPU_COMPILER)
  TANDEM_SM90A(asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"));
#else
  sim::wgmma_commit_group(w);
#endif
}

// Waits until at most Pending committed groups of this thread's wgmmas are in flight.
template <int Pending>
TANDEM_DEVICE void wgmma_wait_group(TANDEM_SIM_WHERE_ONLY) {
  static_assert(Pending >= 0 && Pending <= 7, "wgmma.wait_group takes 0 to 7");
#if defined(TANDEM_GPU_COMPILER)
  TANDEM_SM90A(asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory"));
#else
  sim::wgmma_wait_group(Pending, w);
#endif
}

// Eight accumulators as operands of the wgmma instruction.
#define TANDEM_WGMMA_D8(i)                                                                                    \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])

// The m64nNk16 instruction for N of 64, 128, 256 with TYPE ("bf16" or "f16") operands: one
// asm statement per N (the accumulators are N / 2 operands), inside wgmma_async.
#define TANDEM_WGMMA_ASM(TYPE)                                                                                       \
  if constexpr (N == 64) {                                                                                           \
    TANDEM_SM90A(asm volatile(                                                                                       \
        "{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n"                                                               \
        " wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE                                                 \
        " {"                                                                                                         \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                     \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"                             \
        "}, %32, %33, p, 1, 1, %35, %36;\n}"                                                                         \
        : TANDEM_WGMMA_D8(0), TANDEM_WGMMA_D8(8), TANDEM_WGMMA_D8(16), TANDEM_WGMMA_D8(24)                           \
        : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)), "n"(int(TransA)), "n"(int(TransB))));         \
  } else if constexpr (N == 128) {                                                                                   \
    TANDEM_SM90A(asm volatile(                                                                                       \
        "{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"                                                               \
        " wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE                                                \
        " {"                                                                                                         \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                     \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                           \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                           \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"                             \
        "}, %64, %65, p, 1, 1, %67, %68;\n}"                                                                         \
        : TANDEM_WGMMA_D8(0), TANDEM_WGMMA_D8(8), TANDEM_WGMMA_D8(16), TANDEM_WGMMA_D8(24), TANDEM_WGMMA_D8(32),     \
          TANDEM_WGMMA_D8(40), TANDEM_WGMMA_D8(48), TANDEM_WGMMA_D8(56)                                              \
        : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)), "n"(int(TransA)), "n"(int(TransB))));         \
  } else {                                                                                                           \
    TANDEM_SM90A(asm volatile(                                                                                       \
        "{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"                                                              \
        " wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE                                                \
        " {"                                                                                                         \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                     \
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                           \
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                           \
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "                           \
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "                           \
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "                           \
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "               \
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"             \
        "}, %128, %129, p, 1, 1, %131, %132;\n}"                                                                     \
        : TANDEM_WGMMA_D8(0), TANDEM_WGMMA_D8(8), TANDEM_WGMMA_D8(16), TANDEM_WGMMA_D8(24), TANDEM_WGMMA_D8(32),     \
          TANDEM_WGMMA_D8(40), TANDEM_WGMMA_D8(48), TANDEM_WGMMA_D8(56), TANDEM_WGMMA_D8(64), TANDEM_WGMMA_D8(72),   \
          TANDEM_WGMMA_D8(80), TANDEM_WGMMA_D8(88), TANDEM_WGMMA_D8(96), TANDEM_WGMMA_D8(104), TANDEM_WGMMA_D8(112), \
          TANDEM_WGMMA_D8(120)                                                                                       \
        : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)), "n"(int(TransA)), "n"(int(TransB))));         \
  }

// d (N / 2 floats per thread) = (accumulate ? d : 0) + A * B for the 64 x N tile: m64nNk16, TA
// (bfloat16 or half) in, f32 out, both operands from shared memory; N is 64, 128 or 256. TransA:
// A's descriptor is M-major (imm-trans-a), else K-major; TransB: B's is N-major, else K-major.
template <class TA, unsigned N, bool TransA = false, bool TransB = false>
TANDEM_DEVICE void wgmma_async(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b,
                               bool accumulate TANDEM_SIM_WHERE) {
  static_assert(N == 64 || N == 128 || N == 256, "wgmma_async: N of 64, 128 or 256");
  static_assert(std::is_same_v<TA, bfloat16> || std::is_same_v<TA, half>, "wgmma_async: bfloat16 or half");
#if defined(TANDEM_GPU_COMPILER)
  if constexpr (std::is_same_v<TA, bfloat16>) {
    TANDEM_WGMMA_ASM("bf16")
  } else {
    TANDEM_WGMMA_ASM("f16")
  }
#else
  sim::wgmma(d, N, desc_a, desc_b, accumulate, std::is_same_v<TA, bfloat16>, TransA, TransB, w);
#endif
}
#undef TANDEM_WGMMA_ASM
#undef TANDEM_WGMMA_D8

}  // namespace TANDEM_GPU_ABI
}  // namespace tandem::gpu::kernels
