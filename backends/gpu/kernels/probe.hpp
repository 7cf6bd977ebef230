// The memory-hierarchy probe behind `tandem bench memory --backend GPU`: a kernel that reads a
// working set again and again, so that the set's size decides which level serves the reads (L1,
// L2 or device memory); or, with shared memory, each block's share copied once on chip and read
// from there. What it read is summed into *sink, so that no compiler can drop the reads, and the
// caller can check that every element was read `passes` times.
#pragma once

#include "reduce.hpp"

namespace tandem::gpu::kernels {
inline namespace TANDEM_GPU_ABI {

// Grid-stride over x[0, n), `passes` times. Four accumulators per thread keep four loads in
// flight; the block's total goes into *sink with one atomic.
TANDEM_KERNEL void TANDEM_LAUNCH_BOUNDS(kBlock)
    read_probe_kernel(const float* x, std::size_t n, unsigned passes, float* sink) {
  const std::size_t first = global_thread(), stride = global_threads();
  float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (unsigned p = 0; p < passes; ++p) {
    std::size_t i = first;
    for (; i + 3 * stride < n; i += 4 * stride) {
      a0 += x[i];
      a1 += x[i + stride];
      a2 += x[i + 2 * stride];
      a3 += x[i + 3 * stride];
    }
    for (; i < n; i += stride) a0 += x[i];
  }
  const float total = block_reduce_shuffle<SumOp<float>>((a0 + a1) + (a2 + a3));
  if (thread_rank() == 0) atomic_add(sink, total);
}

// Each block copies `per_block` elements (from x[block * per_block mod n], wrapping) into
// dynamic shared memory once, then reads them `passes` times: the bandwidth of on-chip shared
// memory, with device memory out of the loop.
TANDEM_KERNEL void TANDEM_LAUNCH_BOUNDS(kBlock)
    shared_probe_kernel(const float* x, std::size_t n, unsigned per_block, unsigned passes, float* sink) {
  TANDEM_DYNAMIC_SHARED(float, tile);
  const unsigned t = thread_rank(), threads = block_threads();
  const std::size_t base = std::size_t(block_idx().x) * per_block;
  for (unsigned j = t; j < per_block; j += threads) tile[j] = x[(base + j) % n];
  sync_threads();
  float a0 = 0, a1 = 0;
  for (unsigned p = 0; p < passes; ++p) {
    unsigned j = t;
    for (; j + threads < per_block; j += 2 * threads) {
      a0 += tile[j];
      a1 += tile[j + threads];
    }
    for (; j < per_block; j += threads) a0 += tile[j];
  }
  const float total = block_reduce_shuffle<SumOp<float>>(a0 + a1);
  if (t == 0) atomic_add(sink, total);
}

}  // namespace TANDEM_GPU_ABI
}  // namespace tandem::gpu::kernels
