// The decoupled look-back scan (single pass; Merrill and Garland): the tiles of TileScan
// (scan.hpp) take ids in the order their blocks start, publish their aggregate, and look back
// over their predecessors' flags for the prefix. A block waits here only on tiles with smaller
// ids, which belong to blocks that started before it and so are resident or done: it relies on
// that forward progress, and on the ordering that LookbackSlots documents.
#pragma once

#include "scan.hpp"

namespace tandem::gpu::kernels {
inline namespace TANDEM_GPU_ABI {

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
  const unsigned first = find_first_set(m);
  return first == 0 ? none : first - 1;
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
      // Bounded by the tile's own index: a window that reaches before tile 0 ends the look-back
      // whatever its flags say (tiles before 0 count as a published prefix of 0).
      for (std::int64_t end = std::int64_t(tile) - 1; end >= 0; end -= width) {
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

}  // namespace TANDEM_GPU_ABI
}  // namespace tandem::gpu::kernels
