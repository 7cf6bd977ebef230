// Prefix sums (inclusive and exclusive; f32, f64, and i32 wrapping modulo 2^32). A block scans a
// tile of kScanThreads x kScanItems elements: each thread scans its kScanItems consecutive
// elements in registers (loaded and stored through shared memory, coalesced), the block scans the
// thread totals with warp shuffles, and a tile prefix
// comes from the grid-level scheme:
//   decoupled_lookback - single pass: tiles take ids in launch order, publish their aggregate,
//                        and look back over their predecessors' flags for the prefix;
//   three_pass         - tile sums, a scan of the tile sums, then each tile with its prefix;
//   single_block       - one block walks every tile in order with a running carry.
// A tile is read whole before any of it is written, so out may alias x.
#pragma once

#include <bit>

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

// ---- decoupled look-back ----
// Each tile publishes a status (0 nothing yet, 1 aggregate, 2 inclusive prefix) and a value in a
// slot of scratch zeroed before the launch (LookbackSlots). The first warp looks back a warp's
// width of predecessors at a time: lane l reads tile end - l; once every tile nearer than the
// nearest one with its inclusive prefix has published, the window's values up to that tile are
// added (one predecessor per step made the look-back the bottleneck).
template <class T>
TANDEM_DEVICE T warp_sum_to_lane0(T v) {
  for (unsigned d = warp_size() / 2; d > 0; d /= 2) v = plus(v, shfl_down(v, d));
  return v;
}
// The lowest lane set in a ballot's mask, or `none` where none is.
TANDEM_DEVICE unsigned lowest_lane(lane_mask m, unsigned none) {
  return m == 0 ? none : static_cast<unsigned>(std::countr_zero(m));
}

// Where the tiles publish. A 4-byte T shares one 64-bit word with its status (status in the high
// half), written and read in one access, so a reader never needs a fence between flag and value
// and a window costs one round trip to L2. An 8-byte T has its own arrays: the value is stored,
// then a fence, then the flag; a reader loads the flags, fences, then the values.
template <class T>
struct LookbackSlots {
  static constexpr bool packed = sizeof(T) == 4;
  std::uint64_t* words;  // packed: one per tile
  unsigned* status;      // otherwise: status, aggregates and prefixes per tile
  T* aggregates;
  T* prefixes;

  TANDEM_DEVICE void publish(std::int64_t tile, unsigned flag, T value) const {
    if constexpr (packed) {
      std::uint32_t bits;
      std::memcpy(&bits, &value, sizeof bits);
      store_volatile(words + tile, (std::uint64_t(flag) << 32) | bits);
    } else {
      store_volatile((flag == 2u ? prefixes : aggregates) + tile, value);
      thread_fence();
      store_volatile(status + tile, flag);
    }
  }
  // Tile j's status, and in `value` what goes with it where packed (tiles before 0 count as a
  // published prefix of 0).
  TANDEM_DEVICE unsigned read(std::int64_t j, T& value) const {
    if (j < 0) {
      value = T(0);
      return 2u;
    }
    if constexpr (packed) {
      const std::uint64_t w = load_volatile(words + j);
      const auto bits = static_cast<std::uint32_t>(w);
      std::memcpy(&value, &bits, sizeof bits);
      return static_cast<unsigned>(w >> 32);
    } else {
      return load_volatile(status + j);
    }
  }
  // After a window's flags are read (every lane, after the wait): the values that go with them.
  TANDEM_DEVICE T value_after(std::int64_t j, unsigned flag, T value) const {
    if constexpr (packed) {
      return value;
    } else {
      if (j < 0 || flag == 0u) return T(0);
      return load_volatile((flag == 2u ? prefixes : aggregates) + j);
    }
  }
};

template <class T>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void scan_lookback_kernel(const T* x, T* out, std::size_t n, bool inclusive,
                                                                  LookbackSlots<T> slots, unsigned* counter) {
  TANDEM_SHARED(unsigned, tile_id);
  TANDEM_SHARED(T, tile_prefix);
  if (thread_rank() == 0) tile_id = atomic_add(counter, 1u);  // ids in the order blocks start
  sync_threads();
  const unsigned tile = tile_id;
  TileScan<T> s;
  s.load(x, n, std::size_t(tile) * kScanTile);
  if (warp_id() == 0) {
    const unsigned lane = lane_id(), width = warp_size();
    T prefix = T(0);  // meaningful in lane 0
    if (tile == 0) {
      if (lane == 0) slots.publish(0, 2u, s.aggregate);
    } else {
      if (lane == 0) slots.publish(tile, 1u, s.aggregate);
      for (std::int64_t end = std::int64_t(tile) - 1;; end -= width) {
        const std::int64_t j = end - std::int64_t(lane);
        unsigned flag, nearest;
        T value = T(0);
        for (;;) {  // until every tile nearer than the nearest inclusive prefix has published
          flag = slots.read(j, value);
          nearest = lowest_lane(ballot(flag == 2u), width);
          const unsigned first_missing = lowest_lane(ballot(flag == 0u), width);
          if (first_missing == width || nearest < first_missing) break;
        }
        if constexpr (!LookbackSlots<T>::packed) thread_fence();
        value = slots.value_after(j, flag, value);
        if (lane > nearest) value = T(0);
        prefix = plus(warp_sum_to_lane0(value), prefix);
        if (nearest < width) break;
      }
      if (lane == 0) slots.publish(tile, 2u, plus(prefix, s.aggregate));
    }
    if (lane == 0) tile_prefix = prefix;
  }
  sync_threads();
  s.store(out, n, tile_prefix, inclusive);
}

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
