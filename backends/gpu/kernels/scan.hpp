// Prefix sums (inclusive and exclusive; f32, f64, and i32 wrapping modulo 2^32). A block scans a
// tile of kScanThreads x kScanItems elements: each thread scans its kScanItems consecutive
// elements in registers (loaded and stored through shared memory, coalesced), the block scans the
// thread totals with warp shuffles, and a tile prefix
// comes from the grid-level scheme:
//   decoupled_lookback - single pass: tiles take ids in launch order, publish their aggregate,
//                        and look back over their predecessors' flags for the prefix
//                        (scan_lookback.hpp);
//   three_pass         - tile sums, a scan of the tile sums, then each tile with its prefix;
//   single_block       - one block walks every tile in order with a running carry.
// A tile is read whole before any of it is written, so out may alias x.
#pragma once

#include "common.hpp"

namespace tandem::gpu::kernels {
inline namespace TANDEM_GPU_ABI {

inline constexpr unsigned kScanThreads = 256, kScanItems = 8, kScanTile = kScanThreads * kScanItems;

template <class T>
TANDEM_DEVICE T warp_inclusive_scan(T v) {
  const unsigned lane = lane_id();
  for (unsigned d = 1; d < warp_size(); d *= 2) {
    const T other = shfl_up(v, d);
    if (lane >= d) v = plus(other, v);
  }
  return v;
}

// The exclusive prefix of v over the threads of the block; total gets the block's sum.
template <class T>
TANDEM_DEVICE T block_exclusive_scan(T v, T& total) {
  TANDEM_SHARED(T, warp_sums, [kMaxBlockThreads / kMinWarpSize]);
  const unsigned lane = lane_id(), warp = warp_id(), warps = block_threads() / warp_size();
  const T inclusive = warp_inclusive_scan(v);
  T exclusive = shfl_up(inclusive, 1);
  if (lane == 0) exclusive = T(0);
  if (lane == warp_size() - 1) warp_sums[warp] = inclusive;
  sync_threads();
  if (warp == 0) {
    T s = lane < warps ? warp_sums[lane] : T(0);
    s = warp_inclusive_scan(s);
    if (lane < warps) warp_sums[lane] = s;
  }
  sync_threads();
  const T warp_prefix = warp == 0 ? T(0) : warp_sums[warp - 1];
  total = warp_sums[warps - 1];
  sync_threads();  // warp_sums may be reused by the next call
  return plus(warp_prefix, exclusive);
}

// A tile's elements pass through shared memory so that global reads and writes are coalesced
// (element j of the tile by thread j % kScanThreads) while each thread scans kScanItems
// consecutive ones; one padding slot per kSharedBanks keeps both patterns free of bank conflicts.
inline constexpr unsigned kSharedBanks = 32;  // 4-byte shared-memory banks, NVIDIA and AMD alike
TANDEM_DEVICE unsigned staged_slot(unsigned j) { return j + j / kSharedBanks; }
inline constexpr unsigned kScanStaged = kScanTile + kScanTile / kSharedBanks;
template <class T>
TANDEM_DEVICE T* scan_staging() {  // one array for load and store
  TANDEM_SHARED(T, staged, [kScanStaged]);
  return staged;
}

// One tile, in two steps so the grid scheme can find the tile's prefix in between. Every thread of
// the block calls both (they hold barriers).
template <class T>
struct TileScan {
  T run[kScanItems];  // this thread's inclusive scan of its items
  T thread_prefix;    // sum of the items of earlier threads in the tile
  T aggregate;        // sum of the whole tile
  std::size_t start;  // index of the tile's first element

  TANDEM_DEVICE void load(const T* x, std::size_t n, std::size_t tile_start) {
    T* staged = scan_staging<T>();
    start = tile_start;
    const unsigned t = thread_rank();
    for (unsigned k = 0; k < kScanItems; ++k) {
      const unsigned j = k * kScanThreads + t;
      const std::size_t i = tile_start + j;
      staged[staged_slot(j)] = i < n ? x[i] : T(0);
    }
    sync_threads();
    T acc = T(0);
    for (unsigned k = 0; k < kScanItems; ++k) {
      acc = plus(acc, staged[staged_slot(t * kScanItems + k)]);
      run[k] = acc;
    }
    sync_threads();  // staged is written again by store
    thread_prefix = block_exclusive_scan(acc, aggregate);
  }
  TANDEM_DEVICE void store(T* out, std::size_t n, T tile_prefix, bool inclusive) const {
    T* staged = scan_staging<T>();
    const unsigned t = thread_rank();
    const T base = plus(tile_prefix, thread_prefix);
    for (unsigned k = 0; k < kScanItems; ++k) {
      staged[staged_slot(t * kScanItems + k)] = inclusive ? plus(base, run[k]) : k == 0 ? base : plus(base, run[k - 1]);
    }
    sync_threads();
    for (unsigned k = 0; k < kScanItems; ++k) {
      const unsigned j = k * kScanThreads + t;
      const std::size_t i = start + j;
      if (i < n) out[i] = staged[staged_slot(j)];
    }
    sync_threads();  // staged is written again by the next tile's load
  }
};

// ---- three passes ----
template <class T>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void scan_tile_sums_kernel(const T* x, std::size_t n, T* sums,
                                                                   std::size_t tiles) {
  for (std::size_t tile = block_idx().x; tile < tiles; tile += grid_dim().x) {
    TileScan<T> s;
    s.load(x, n, tile * kScanTile);
    if (thread_rank() == 0) sums[tile] = s.aggregate;
  }
}

// One block: in-place exclusive scan of data[0..n) tile by tile with a carry; the same loop is
// the single_block scheme over the whole input.
template <class T>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void scan_single_block_kernel(const T* x, T* out, std::size_t n,
                                                                      bool inclusive) {
  T carry = T(0);
  for (std::size_t start = 0; start < n; start += kScanTile) {
    TileScan<T> s;
    s.load(x, n, start);
    s.store(out, n, carry, inclusive);
    carry = plus(carry, s.aggregate);
  }
}

template <class T>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void scan_tiles_kernel(const T* x, T* out, std::size_t n, bool inclusive,
                                                               const T* tile_prefixes, std::size_t tiles) {
  for (std::size_t tile = block_idx().x; tile < tiles; tile += grid_dim().x) {
    TileScan<T> s;
    s.load(x, n, tile * kScanTile);
    s.store(out, n, tile_prefixes[tile], inclusive);
  }
}

}  // namespace TANDEM_GPU_ABI
}  // namespace tandem::gpu::kernels
