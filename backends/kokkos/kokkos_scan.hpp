// The kokkos backend's scans (see "scan" below). Included by kokkos_backend.cpp only, after
// kokkos_kernels.hpp, whose chunks, folds and streaming stores they use.
#pragma once

#include "kokkos_kernels.hpp"

namespace tandem::kokkos_backend {

// ---- scan ----
// On a host space a parallel_scan's index is a chunk: its first pass sums the chunk in lanes
// (fold), its final pass scans it 16-byte vectors at a time (GCC/Clang vector extensions, so
// whatever ISA Kokkos compiles for): each vector scanned by two shifted additions, four vectors'
// totals combined as a tree, one addition per four vectors waiting on the running total: the
// dependency chain is a quarter of a scalar scan's, which is what bounds a scan in cache.
template <class Acc, class T>
struct Widened {
  const T* x;
  KOKKOS_INLINE_FUNCTION Acc operator()(std::int64_t i) const { return static_cast<Acc>(x[i]); }
};
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define TANDEM_KOKKOS_VECTOR_SCAN 1
template <class Acc>
struct Vector {
  using type [[gnu::vector_size(16)]] = Acc;
  static constexpr int width = int(16 / sizeof(Acc));
  static type shift1(type v) {  // one lane towards the high end, zero in
    const type z{};
    if constexpr (width == 4) {
      return __builtin_shufflevector(z, v, 0, 4, 5, 6);
    } else {
      return __builtin_shufflevector(z, v, 0, 2);
    }
  }
  static type last(type v) {  // the last lane in every lane
    if constexpr (width == 4) {
      return __builtin_shufflevector(v, v, 3, 3, 3, 3);
    } else {
      return __builtin_shufflevector(v, v, 1, 1);
    }
  }
  static type scan(type v) {
    v += shift1(v);
    if constexpr (width == 4) v += __builtin_shufflevector(type{}, v, 0, 1, 4, 5);
    return v;
  }
};
#endif
// Scans x[begin, end) into out from `running`; returns the running value after it. out may alias
// x: four vectors are read before they are written. T and Acc have one size (i32 sums in unsigned).
// With ahead > 0 it also prefetches x[begin + ahead, end + ahead), which must exist: the chunk
// the caller folds next, from memory, while this one is scanned from the cache, so that the
// memory is never idle while a chunk is scanned.
template <bool Inclusive, bool Stream, class Acc, class T>
Acc scan_chunk(std::int64_t begin, std::int64_t end, const T* x, T* out, Acc running, std::int64_t ahead) {
  static_assert(sizeof(Acc) == sizeof(T));
  std::int64_t i = begin;
#ifdef TANDEM_KOKKOS_VECTOR_SCAN
  using V = Vector<Acc>;
  using Lanes = typename V::type;
  Lanes run = Lanes{} + running;
  for (; i + 4 * V::width <= end; i += 4 * V::width) {
    Lanes a[4], t[4];
    if (ahead > 0) __builtin_prefetch(x + i + ahead);  // the line read next by fold (below)
    std::memcpy(a, x + i, sizeof a);
    for (int k = 0; k < 4; ++k) {
      const Lanes s = V::scan(a[k]);
      t[k] = V::last(s);
      a[k] = Inclusive ? s : V::shift1(s);
    }
    const Lanes t01 = t[0] + t[1];
    a[1] += t[0];
    a[2] += t01;
    a[3] += t01 + t[2];
    for (auto& ak : a) ak += run;
    static_assert(sizeof a == kLine);
    if constexpr (Stream) {
      stream_line(out + i, a);
    } else {
      std::memcpy(out + i, a, sizeof a);
    }
    run += t01 + (t[2] + t[3]);
  }
  running = run[0];
  if constexpr (Stream) stream_fence();
#endif
  for (; i < end; ++i) {
    const Acc v = static_cast<Acc>(x[i]);
    if constexpr (!Inclusive) out[i] = static_cast<T>(running);
    running += v;
    if constexpr (Inclusive) out[i] = static_cast<T>(running);
  }
  return running;
}
// How a host space scans: in parts of `part` elements (a multiple of kChunk), one parallel_scan
// each, with `sums` (2 * part / kChunk values of the widest sum, host memory) carrying each
// chunk's sum from one part's scan to the next.
struct ScanPlan {
  std::int64_t part;
  bool stream;  // write with streaming stores (see stream_line)
  void* sums;
};
// Scans part [begin, end) of x[0, n) into out from `base`; returns the total from base over it.
// The final pass of chunk c also sums chunk c + P of the next part (P chunks a part): its reads
// from memory overlap this part's scanning, and the next part's first pass takes the sums instead
// of reading x, whose chunks the same thread then finds in its cache. Each element is read from
// memory once, as in a copy. (A parallel_scan over the whole range reads x twice, from memory
// both times past the last-level cache: about half the speed.)
template <bool Inclusive, bool Stream, class T, class Acc>
Acc scan_part(std::int64_t begin, std::int64_t end, std::int64_t n, const T* x, T* out, Acc base,
              const ScanPlan& plan) {
  const std::int64_t first = begin / kChunk, chunks = chunks_of(n), ahead = plan.part / kChunk, slots = 2 * ahead;
  const bool summed = begin > 0;  // by the part before
  Acc* sums = static_cast<Acc*>(plan.sums);
  Acc total = 0;
  Kokkos::parallel_scan(
      "tandem::scan", Range(first, chunks_of(end)),
      KOKKOS_LAMBDA(std::int64_t c, Acc & running, bool final) {
        if (c == first) running += base;  // the parts before this one
        if (!final) {
          running += summed ? sums[c % slots] : fold<Acc, Add>(c * kChunk, chunk_end(c, n), Acc(0), Widened<Acc, T>{x});
          return;
        }
        running = scan_chunk<Inclusive, Stream>(c * kChunk, chunk_end(c, n), x, out, running,
                                                (c + ahead + 1) * kChunk <= n ? ahead * kChunk : 0);
        if (c + ahead < chunks) {
          sums[(c + ahead) % slots] =
              fold<Acc, Add>((c + ahead) * kChunk, chunk_end(c + ahead, n), Acc(0), Widened<Acc, T>{x});
        }
      },
      total);
  return total;
}
template <bool Inclusive, class T>
void scan_as(std::int64_t n, const T* x, T* out, const ScanPlan& plan) {
  using Acc = std::conditional_t<std::is_same_v<T, std::int32_t>, unsigned, T>;
  if constexpr (kHostMemory) {
    Acc base = 0;
    for (std::int64_t begin = 0; begin < n; begin += plan.part) {
      const std::int64_t end = std::min(n, begin + plan.part);
      base = plan.stream ? scan_part<Inclusive, true>(begin, end, n, x, out, base, plan)
                         : scan_part<Inclusive, false>(begin, end, n, x, out, base, plan);
    }
  } else {
    // out may alias x: Kokkos' scan reads x[i] in both of its passes before the final one writes out[i].
    Kokkos::parallel_scan(
        "tandem::scan", Range(0, n), KOKKOS_LAMBDA(std::int64_t i, Acc & running, bool final) {
          const Acc v = static_cast<Acc>(x[i]);
          if (final && !Inclusive) out[i] = static_cast<T>(running);
          running += v;
          if (final && Inclusive) out[i] = static_cast<T>(running);
        });
  }
}
template <class T>
void scan(bool inclusive, std::int64_t n, const T* x, T* out, const ScanPlan& plan) {
  if (inclusive) {
    scan_as<true>(n, x, out, plan);
  } else {
    scan_as<false>(n, x, out, plan);
  }
}

}  // namespace tandem::kokkos_backend
