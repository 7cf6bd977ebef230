// Reductions. A reducer R says how partial results combine (R::Acc, identity, combine); a source
// S says what element i contributes (x[i], x[i]^2, x[i]*y[i], (a[i]-b[i])^2, (x[i], i)). The
// block-level building blocks come in two kinds, kept for the teaching ladder:
//   shared_tree  - a tree in shared memory, halving the active threads with a barrier per level;
//   warp_shuffle - each warp reduces in registers with shuffles, then one warp reduces the warps.
// and the grid level in two: two passes (partials, then one block) or a single pass in which the
// last block to finish (an atomic ticket) reduces the partials. All of them work for any warp
// width and need every thread of the block to call them.
#pragma once

#include <cmath>

#include "common.hpp"
#include "tandem/op_table.hpp"

namespace tandem::gpu::kernels {
inline namespace TANDEM_GPU_ABI {

// A value reduction's row of the op table (tandem/op_table.hpp) as a reducer: its identity and
// combine, the same algebra as on the host.
template <class Row, class T>
struct RowReducer {
  using Acc = T;
  static TANDEM_DEVICE Acc identity() { return Row::template identity<T>(); }
  static TANDEM_DEVICE Acc combine(Acc a, Acc b) { return Row::template combine<T>(a, b); }
};
template <class T>
using SumOp = RowReducer<op::Sum, T>;
template <class T>
using MinOp = RowReducer<op::Min, T>;
template <class T>
using MaxOp = RowReducer<op::Max, T>;
// (value, index): the first NaN wins, else the largest value; ties go to the lower index.
template <class T>
struct ArgAcc {
  T value;
  std::int32_t index;
};
template <class T>
struct ArgMaxOp {
  using Acc = ArgAcc<T>;
  static TANDEM_DEVICE Acc identity() { return {lowest<T>(), std::numeric_limits<std::int32_t>::max()}; }
  static TANDEM_DEVICE Acc combine(Acc a, Acc b) {
    return math::argmax_prefers(a.value, a.index, b.value, b.index) ? b : a;
  }
};

// Warp shuffles of accumulators (a pair moves as two shuffles).
template <class T>
TANDEM_DEVICE T shuffle_down(T v, unsigned d) {
  return shfl_down(v, d);
}
template <class T>
TANDEM_DEVICE ArgAcc<T> shuffle_down(ArgAcc<T> v, unsigned d) {
  return {shfl_down(v.value, d), shfl_down(v.index, d)};
}

// Sources: element i's contribution.
template <class T>
struct Plain {
  const T* x;
  TANDEM_DEVICE T operator()(std::size_t i) const { return x[i]; }
};
template <class T>
struct Squares {
  const T* x;
  TANDEM_DEVICE T operator()(std::size_t i) const { return x[i] * x[i]; }
};
template <class T>
struct Products {
  const T* x;
  const T* y;
  TANDEM_DEVICE T operator()(std::size_t i) const { return x[i] * y[i]; }
};
template <class T>
struct SquaredDifferences {
  const T* a;
  const T* b;
  TANDEM_DEVICE T operator()(std::size_t i) const {
    const T d = a[i] - b[i];
    return d * d;
  }
};
template <class T>
struct Indexed {
  const T* x;
  TANDEM_DEVICE ArgAcc<T> operator()(std::size_t i) const { return {x[i], static_cast<std::int32_t>(i)}; }
};

template <class>
struct is_arg_acc : std::false_type {};
template <class T>
struct is_arg_acc<ArgAcc<T>> : std::true_type {};

// Reads a partial another block wrote (field by field: volatile loads of scalars).
template <class T>
TANDEM_DEVICE T load_partial(const T* p) {
  return load_volatile(p);
}
template <class T>
TANDEM_DEVICE ArgAcc<T> load_partial(const ArgAcc<T>* p) {
  return {load_volatile(&p->value), load_volatile(&p->index)};
}

// What the result element is made of the total: the value, its square root, the mean, the index.
enum class Finish { value, sqrt, mean };
template <class Acc, class Out>
TANDEM_DEVICE Out finish(Finish f, Acc total, std::size_t n) {
  if constexpr (is_arg_acc<Acc>::value) {
    return total.index;
  } else if constexpr (std::is_integral_v<Acc>) {
    return total;
  } else {
    switch (f) {
      case Finish::sqrt:
        return std::sqrt(total);
      case Finish::mean:
        return total / Out(n);
      default:
        return total;
    }
  }
}

enum class BlockReduce { shared_tree, warp_shuffle };

template <class R>
TANDEM_DEVICE typename R::Acc warp_reduce(typename R::Acc a) {
  for (unsigned d = warp_size() / 2; d > 0; d /= 2) a = R::combine(a, shuffle_down(a, d));
  return a;  // lane 0 holds the warp's result
}

// The block's total, in thread 0 (other threads get partial values).
template <class R>
TANDEM_DEVICE typename R::Acc block_reduce_shuffle(typename R::Acc a) {
  using Acc = typename R::Acc;
  TANDEM_SHARED(Acc, warp_totals, [kMaxBlockThreads / kMinWarpSize]);
  const unsigned lane = lane_id(), warp = warp_id(), warps = block_threads() / warp_size();
  a = warp_reduce<R>(a);
  if (lane == 0) warp_totals[warp] = a;
  sync_threads();
  if (warp == 0) a = warp_reduce<R>(lane < warps ? warp_totals[lane] : R::identity());
  sync_threads();  // warp_totals may be reused by the next call
  return a;
}

// The same with a tree in shared memory; the block size must be a power of two up to kBlock.
template <class R>
TANDEM_DEVICE typename R::Acc block_reduce_tree(typename R::Acc a) {
  using Acc = typename R::Acc;
  TANDEM_SHARED(Acc, values, [kBlock]);
  const unsigned t = thread_rank();
  values[t] = a;
  sync_threads();
  for (unsigned half = block_threads() / 2; half > 0; half /= 2) {
    if (t < half) values[t] = R::combine(values[t], values[t + half]);
    sync_threads();
  }
  a = values[0];
  sync_threads();
  return a;
}

template <class R>
TANDEM_DEVICE typename R::Acc block_reduce(BlockReduce how, typename R::Acc a) {
  return how == BlockReduce::shared_tree ? block_reduce_tree<R>(a) : block_reduce_shuffle<R>(a);
}

// The block's total, in every thread.
template <class R>
TANDEM_DEVICE typename R::Acc block_all_reduce(typename R::Acc a) {
  using Acc = typename R::Acc;
  TANDEM_SHARED(Acc, total);
  a = block_reduce_shuffle<R>(a);
  if (thread_rank() == 0) total = a;
  sync_threads();
  a = total;
  sync_threads();
  return a;
}

// This thread's share of a grid-stride pass over n elements, kReduceLoads of them loaded before
// any is combined: a full grid holds only 2048 threads per multiprocessor, and one load in flight
// per thread keeps too few bytes in flight to reach the memory's bandwidth. Combined in index
// order, as one at a time would.
inline constexpr unsigned kReduceLoads = 8;
template <class R, class S>
TANDEM_DEVICE typename R::Acc thread_partial(const S& src, std::size_t n) {
  using Acc = typename R::Acc;
  Acc a = R::identity();
  const std::size_t stride = global_threads();
  std::size_t i = global_thread();
  for (; i + (kReduceLoads - 1) * stride < n; i += kReduceLoads * stride) {
    Acc v[kReduceLoads];
    for (unsigned u = 0; u < kReduceLoads; ++u) v[u] = src(i + u * stride);
    for (unsigned u = 0; u < kReduceLoads; ++u) a = R::combine(a, v[u]);
  }
  for (; i < n; i += stride) a = R::combine(a, src(i));
  return a;
}

// Pass 1 of 2: partials[block] = the block's share.
template <class R, class S>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void reduce_partials_kernel(S src, std::size_t n, typename R::Acc* partials,
                                                                    BlockReduce how) {
  const typename R::Acc a = block_reduce<R>(how, thread_partial<R>(src, n));
  if (thread_rank() == 0) partials[block_idx().x] = a;
}

// Pass 2 of 2: one block reduces the partials into the result.
template <class R, class Out>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void reduce_final_kernel(const typename R::Acc* partials, unsigned count,
                                                                 Out* result, Finish f, std::size_t n,
                                                                 BlockReduce how) {
  typename R::Acc a = R::identity();
  for (unsigned i = thread_rank(); i < count; i += block_threads()) a = R::combine(a, partials[i]);
  a = block_reduce<R>(how, a);
  if (thread_rank() == 0) *result = finish<typename R::Acc, Out>(f, a, n);
}

// Single pass: every block writes its partial; the last block to take a ticket reduces them
// (and resets the ticket for the next launch).
template <class R, class S, class Out>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void reduce_single_pass_kernel(S src, std::size_t n, typename R::Acc* partials,
                                                                       unsigned* ticket, Out* result, Finish f) {
  TANDEM_SHARED(bool, last);
  typename R::Acc a = block_reduce_shuffle<R>(thread_partial<R>(src, n));
  if (thread_rank() == 0) {
    partials[block_idx().x] = a;
    thread_fence();  // the partial is visible before the ticket says so
    last = atomic_add(ticket, 1u) == grid_dim().x - 1;
  }
  sync_threads();
  if (!last) return;  // uniform across the block
  thread_fence();
  a = R::identity();
  for (unsigned i = thread_rank(); i < grid_dim().x; i += block_threads()) {
    a = R::combine(a, load_partial(partials + i));
  }
  a = block_reduce_shuffle<R>(a);
  if (thread_rank() == 0) {
    *result = finish<typename R::Acc, Out>(f, a, n);
    *ticket = 0;
  }
}

// Per-row sum or max of x (rows, cols): one block per row, grid-stride over rows.
template <class R>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void reduce_rows_kernel(std::int64_t rows, std::int64_t cols,
                                                                const typename R::Acc* x, std::int64_t ldx,
                                                                typename R::Acc* out) {
  for (std::int64_t r = block_idx().x; r < rows; r += grid_dim().x) {
    typename R::Acc a = R::identity();
    for (std::int64_t c = thread_rank(); c < cols; c += block_threads()) a = R::combine(a, x[r * ldx + c]);
    a = block_reduce_shuffle<R>(a);
    if (thread_rank() == 0) out[r] = a;
  }
}

// Per-column sum or max: block (32, 8) owns 32 columns; its 8 rows of threads split the rows
// (coalesced along columns) and combine through shared memory.
inline constexpr unsigned kColumnsPerBlock = 32, kRowGroups = 8;
template <class R>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void reduce_cols_kernel(std::int64_t rows, std::int64_t cols,
                                                                const typename R::Acc* x, std::int64_t ldx,
                                                                typename R::Acc* out) {
  using Acc = typename R::Acc;
  TANDEM_SHARED(Acc, partial, [kRowGroups][kColumnsPerBlock + 1]);
  const unsigned tx = thread_idx().x, ty = thread_idx().y;
  for (std::int64_t c0 = std::int64_t(block_idx().x) * kColumnsPerBlock; c0 < cols;
       c0 += std::int64_t(grid_dim().x) * kColumnsPerBlock) {
    const std::int64_t c = c0 + tx;
    Acc a = R::identity();
    if (c < cols) {
      for (std::int64_t r = ty; r < rows; r += kRowGroups) a = R::combine(a, x[r * ldx + c]);
    }
    partial[ty][tx] = a;
    sync_threads();
    if (ty == 0 && c < cols) {
      for (unsigned g = 1; g < kRowGroups; ++g) a = R::combine(a, partial[g][tx]);
      out[c] = a;
    }
    sync_threads();
  }
}

}  // namespace TANDEM_GPU_ABI
}  // namespace tandem::gpu::kernels
