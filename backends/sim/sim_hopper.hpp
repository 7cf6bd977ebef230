// The simulator's model of what Hopper (sm_90) kernels use to move and multiply tiles: mbarriers
// (arrival counts, transaction bytes, phases), tensor-memory-access (TMA) copies of 2D boxes from
// global into shared memory, with the tensor map's swizzle, completing on an mbarrier, and the
// warpgroup's asynchronous matrix multiply (wgmma) from shared-memory descriptors. What
// backends/gpu/kernels/hopper.hpp calls in a simulator build; implemented in sim_hopper.cpp.
//
// As on the GPU, and checked:
//  - an mbarrier's phase completes when its pending arrivals reach 0 and its transaction count
//    is 0; then it starts the next phase with the count it was initialized with. try_wait on
//    parity P is true once the phase of parity P has completed (the current phase's parity is not
//    P). More arrivals than the count in one phase, an mbarrier used before its init or outside
//    shared memory, and a transaction count past +-(2^20 - 1) are errors.
//  - a TMA copy is in flight from its issue until it lands: it reads global memory and writes
//    shared memory when it lands, then completes its bytes (the whole box's, zeros filled past the
//    tensor's edges) on its mbarrier. Copies land at random round ends of the block, never in the
//    round that issued them, in any order: a thread that reads the tile before its mbarrier says
//    so reads the bytes from before (shared memory starts as 0xFF bytes), and a copy into a stage
//    still being read overwrites it at a random point. A block that ends with copies in flight,
//    a destination not 128-byte aligned in shared memory, or a box past the shared memory fails.
//  - a TMA copy may complete only on an mbarrier whose initializing thread has fenced the init
//    for the async proxy since (fence_mbarrier_init, or fence_proxy_async_shared).
//  - wgmma m64nNk16 (bf16 or f16 in, f32 accumulators): the 128 threads of a warpgroup (four
//    consecutive 32-lane warps) multiply A (64 x 16) by B (16 x N), each K-major or, transposed
//    (imm-trans-a/b), M- or N-major in shared memory as their descriptors say (start address,
//    leading and stride byte offsets, swizzle), into accumulators laid out over the threads as
//    PTX's fragment layout says. An operation is asynchronous: from its issue until a
//    wgmma_wait_group leaves its group behind, its accumulators hold NaN (a read before the wait
//    shows), and the shared memory it reads must not change (it is read at the issue and again
//    at that wait: a stage refilled before the wait, or an operation issued before its operands
//    landed, fails, naming the wgmma). A thread that ends with operations in flight, a warpgroup
//    whose threads issued different numbers of operations, a descriptor with a base offset, a
//    warp not 32 lanes wide, or operands outside shared memory fail.
//  - threads waiting on mbarriers are switched out; when a round passes in which threads waited
//    on mbarriers, no other thread could run (the rest wait at barriers or warp exchanges, or have
//    ended) and nothing else happened (no arrival, no landed copy, no barrier, no warp exchange, no
//    thread ended) sixteen times in a row, the block is hung: the error names each waiting
//    thread's mbarrier, phase, pending arrivals and bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <source_location>

#include "tandem/gpu/types.hpp"

namespace tandem::sim {

// The simulator's tensor map: what cuTensorMapEncodeTiled encodes for a 2D tensor of elem_bytes
// elements, `width` along the contiguous dimension (x) and `height` rows (y) `row_bytes` apart,
// copied in boxes of box_width x box_height elements. Made by make_tensor_map_2d.
struct TensorMap2D {
  const unsigned char* base = nullptr;
  std::uint32_t elem_bytes = 0;
  std::uint64_t width = 0, height = 0, row_bytes = 0;
  std::uint32_t box_width = 0, box_height = 0;
  gpu::Swizzle swizzle = gpu::Swizzle::none;
};

// With cuTensorMapEncodeTiled's rules: a base aligned to 16 bytes, row_bytes a multiple of 16 and
// at least width * elem_bytes, boxes of 1 to 256 elements a side whose rows are a multiple of 16
// bytes and, when swizzled, at most the swizzle's span (32, 64 or 128 bytes); elem_bytes 1, 2,
// 4 or 8. InvalidArgument naming the rule otherwise.
TensorMap2D make_tensor_map_2d(const void* base, std::size_t elem_bytes, std::uint64_t width, std::uint64_t height,
                               std::uint64_t row_bytes, std::uint32_t box_width, std::uint32_t box_height,
                               gpu::Swizzle swizzle);

// ---- device side (inside a kernel) ----
void mbarrier_init(void* bar, std::uint32_t arrivals, const std::source_location& where);
// fence_mbarrier_init or fence_proxy_async_shared: the mbarriers this thread initialized may now
// take TMA copies' bytes (a copy completing on one before is an error).
void fence_mbarrier_init(const std::source_location& where);
// Adds tx_bytes to the transaction count, then arrives (tx_bytes 0: a plain arrive).
void mbarrier_arrive(void* bar, std::uint32_t tx_bytes, const std::source_location& where);
bool mbarrier_try_wait_parity(void* bar, std::uint32_t parity, const std::source_location& where);
// The box at element (x, y) of the map's tensor into shared memory at dst, completing on bar.
void tma_load_2d(void* dst, const TensorMap2D& map, std::int32_t x, std::int32_t y, void* bar,
                 const std::source_location& where);
// Where p lies in the block's shared memory window, as cvta.to.shared gives it (fails elsewhere).
std::uint32_t shared_window_address(const void* p, const std::source_location& where);
// One wgmma of this thread's warpgroup: d (n / 2 floats) = (accumulate ? d : 0) + A * B, with
// 16-bit elements (bf16 when `bf16`, else f16), A M-major when mn_major_a (else K-major) and B
// N-major when mn_major_b; in flight until wgmma_wait_group.
void wgmma(float* d, unsigned n, std::uint64_t desc_a, std::uint64_t desc_b, bool accumulate, bool bf16,
           bool mn_major_a, bool mn_major_b, const std::source_location& where);
void wgmma_commit_group(const std::source_location& where);
// Completes this thread's oldest groups until at most `pending` are in flight.
void wgmma_wait_group(unsigned pending, const std::source_location& where);

}  // namespace tandem::sim
