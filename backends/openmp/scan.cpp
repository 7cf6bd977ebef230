// Parallel, cache-blocked scan. The input is walked in super-blocks of threads x kPiece elements;
// each thread sums its piece (which stays in its L2), the threads agree on offsets, and each scans
// its still-cached piece: two passes over cache, one over memory. Inside a piece, kChains
// interleaved sub-chunks keep several additions in flight (a single running sum would be
// latency-bound at one element per add latency).
#include <algorithm>
#include <vector>

#include <omp.h>

#include "openmp_backend.hpp"
#include "tandem/detail/scalar_math.hpp"

namespace tandem::openmp {

namespace {

constexpr std::int64_t kPiece = 1 << 15;  // elements per thread per super-block (128 KiB of f32)
constexpr int kChains = 8;

template <class T> struct ScanAcc { using type = T; };
template <> struct ScanAcc<std::int32_t> { using type = std::uint32_t; };  // wraps, no UB

template <class Acc, class T> Acc piece_sum(const T* x, std::int64_t n) {
  Acc lanes[kChains * 4] = {};
  std::int64_t i = 0;
  for (; i + kChains * 4 <= n; i += kChains * 4) {
#pragma omp simd
    for (int l = 0; l < kChains * 4; ++l) lanes[l] += Acc(x[i + l]);
  }
  Acc total = 0;
  for (; i < n; ++i) total += Acc(x[i]);
  for (Acc l : lanes) total += l;
  return total;
}

// Scans x[0, n) into out with `offset` added; out may alias x.
template <bool inclusive, class Acc, class T> void piece_scan(const T* x, T* out, std::int64_t n, Acc offset) {
  // Chains start len elements apart. A len whose byte stride is a multiple of 4 KiB would put
  // all 16 streams (8 read, 8 written) in the same L1 sets; shortening it by one cache line
  // spreads them out (the remainder goes to the sequential tail).
  std::int64_t len = n / kChains;
  if (len > 64) len -= 64 / static_cast<std::int64_t>(sizeof(T));
  Acc start[kChains];
  Acc running = offset;
  for (int c = 0; c < kChains; ++c) {  // offsets of the sub-chunks
    start[c] = running;
    running += piece_sum<Acc>(x + c * len, len);
  }
  for (std::int64_t j = 0; j < len; ++j) {
#pragma GCC unroll 8
    for (int c = 0; c < kChains; ++c) {
      const Acc v = Acc(x[c * len + j]);
      if constexpr (!inclusive) out[c * len + j] = static_cast<T>(start[c]);
      start[c] += v;
      if constexpr (inclusive) out[c * len + j] = static_cast<T>(start[c]);
    }
  }
  Acc acc = running;  // the tail after kChains * len
  for (std::int64_t i = kChains * len; i < n; ++i) {
    const Acc v = Acc(x[i]);
    if constexpr (!inclusive) out[i] = static_cast<T>(acc);
    acc += v;
    if constexpr (inclusive) out[i] = static_cast<T>(acc);
  }
}

template <bool inclusive, class T> void scan_impl(const T* x, T* out, std::int64_t n) {
  using Acc = typename ScanAcc<T>::type;
  if (n < static_cast<std::int64_t>(kParallelThreshold)) {
    piece_scan<inclusive, Acc>(x, out, n, Acc(0));
    return;
  }
  const int max_threads = omp_get_max_threads();
  // Partials double-buffered by super-block parity: one barrier per super-block suffices.
  std::vector<Acc> partial(2 * static_cast<std::size_t>(max_threads));
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), threads = omp_get_num_threads();
    Acc carry = 0;  // every thread keeps the same running total
    int parity = 0;
    for (std::int64_t base = 0; base < n; base += threads * kPiece, parity ^= 1) {
      const std::int64_t begin = std::min(n, base + t * kPiece), end = std::min(n, begin + kPiece);
      Acc* slot = partial.data() + parity * max_threads;
      slot[t] = piece_sum<Acc>(x + begin, end - begin);
#pragma omp barrier
      Acc offset = carry;
      for (int u = 0; u < t; ++u) offset += slot[u];
      Acc block_total = offset;
      for (int u = t; u < threads; ++u) block_total += slot[u];
      piece_scan<inclusive, Acc>(x + begin, out + begin, end - begin, offset);
      carry = block_total;
    }
  }
}

}  // namespace

void OpenMPBackend::scan(Queue q, ScanKind kind, DType t, std::size_t n, const void* x, void* out, std::string_view) {
  check_queue(q);
  host::dispatch_numeric(t, [&]<class T>() {
    const auto* in = static_cast<const T*>(x);
    auto* o = static_cast<T*>(out);
    const auto count = static_cast<std::int64_t>(n);
    kind == ScanKind::inclusive ? scan_impl<true>(in, o, count) : scan_impl<false>(in, o, count);
  });
}

}  // namespace tandem::openmp
