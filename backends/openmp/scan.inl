// Parallel, cache-blocked scan. The input is walked in super-blocks of threads x kPiece elements;
// the threads agree on offsets from the sums of their pieces, and each scans its still-cached
// piece while it reads and sums its piece of the next super-block from memory (software
// pipelining): reads, writes and the scan's arithmetic all overlap, the data is read from memory
// once and written once, like a copy. No barrier: each thread waits only for the sums it needs
// (PhaseCounter, in scan_impl), so the threads may drift a phase apart. (Summing a piece
// and then scanning it would leave memory idle in one direction at a time.)
//   vector scan (x86: SSE2, and AVX2 or AVX-512 where the variant has them): each vector is
//     scanned in registers (log2(width) shifted adds), the totals of four vectors are combined as
//     a tree, and only one addition per four vectors waits on the running total; large outputs
//     that are not the input are written with streaming stores (no read of the lines first, as in
//     a copy). The next piece is prefetched ahead of its reads, as far and into the cache the
//     tuning says (ReadPrefetch: calibrated per CPU).
//   chained scan (elsewhere): kChains interleaved sub-chunks keep several additions in flight
//     (a single running sum is latency-bound at one element per add latency).

constexpr std::int64_t kPiece = 1 << 15;  // elements per thread per super-block (128 KiB of f32)
constexpr int kStreams = 4;               // concurrent sub-streams in the memory pass

template <class Acc, class T>
Acc stream_sum(const T* x, std::int64_t n) {
  constexpr int kWidth = 8;
  Acc lanes[kStreams][kWidth] = {};
  const std::int64_t part = n / kStreams / kWidth * kWidth;
  for (std::int64_t j = 0; j < part; j += kWidth) {
#pragma GCC unroll 4
    for (int s = 0; s < kStreams; ++s) {
#pragma omp simd
      for (int l = 0; l < kWidth; ++l) lanes[s][l] += Acc(x[s * part + j + l]);
    }
  }
  Acc total = 0;
  for (std::int64_t i = kStreams * part; i < n; ++i) total += Acc(x[i]);
  for (const auto& stream : lanes) {
    for (Acc l : stream) total += l;
  }
  return total;
}

// Scans x[0, n) into out with `offset` added, one element at a time; out may alias x.
template <bool inclusive, class Acc, class T>
Acc scalar_scan(const T* x, T* out, std::int64_t n, Acc running) {
  for (std::int64_t i = 0; i < n; ++i) {
    const Acc v = Acc(x[i]);
    if constexpr (!inclusive) out[i] = static_cast<T>(running);
    running += v;
    if constexpr (inclusive) out[i] = static_cast<T>(running);
  }
  return running;
}

#if defined(__SSE2__)

// One 16-byte vector of Acc: its width, load/store, addition, a shift by whole lanes towards the
// high end (zeros in), the last lane broadcast, and the in-register scan.
template <class Acc>
struct Vec;
template <>
struct Vec<float> {
  using V = __m128;
  static constexpr int width = 4;
  static V load(const float* p) { return _mm_loadu_ps(p); }
  static void store(float* p, V v) { _mm_storeu_ps(p, v); }
  static void stream(float* p, V v) { _mm_stream_ps(p, v); }
  static V add(V a, V b) { return _mm_add_ps(a, b); }
  static V splat(float a) { return _mm_set1_ps(a); }
  static float first(V v) { return _mm_cvtss_f32(v); }
  template <int k>
  static V shift(V v) {
    return _mm_castsi128_ps(_mm_slli_si128(_mm_castps_si128(v), 4 * k));
  }
  static V last(V v) { return _mm_shuffle_ps(v, v, 0xFF); }
  static V scan(V v) {
    const V a = add(v, shift<1>(v));
    return add(a, shift<2>(a));
  }
};
template <>
struct Vec<double> {
  using V = __m128d;
  static constexpr int width = 2;
  static V load(const double* p) { return _mm_loadu_pd(p); }
  static void store(double* p, V v) { _mm_storeu_pd(p, v); }
  static void stream(double* p, V v) { _mm_stream_pd(p, v); }
  static V add(V a, V b) { return _mm_add_pd(a, b); }
  static V splat(double a) { return _mm_set1_pd(a); }
  static double first(V v) { return _mm_cvtsd_f64(v); }
  template <int k>
  static V shift(V v) {
    return _mm_castsi128_pd(_mm_slli_si128(_mm_castpd_si128(v), 8 * k));
  }
  static V last(V v) { return _mm_unpackhi_pd(v, v); }
  static V scan(V v) { return add(v, shift<1>(v)); }
};
template <>
struct Vec<std::uint32_t> {  // i32 data, wrapping arithmetic
  using V = __m128i;
  static constexpr int width = 4;
  static V load(const std::int32_t* p) { return _mm_loadu_si128(reinterpret_cast<const V*>(p)); }
  static void store(std::int32_t* p, V v) { _mm_storeu_si128(reinterpret_cast<V*>(p), v); }
  static void stream(std::int32_t* p, V v) { _mm_stream_si128(reinterpret_cast<V*>(p), v); }
  static V add(V a, V b) { return _mm_add_epi32(a, b); }
  static V splat(std::uint32_t a) { return _mm_set1_epi32(static_cast<int>(a)); }
  static std::uint32_t first(V v) { return static_cast<std::uint32_t>(_mm_cvtsi128_si32(v)); }
  template <int k>
  static V shift(V v) {
    return _mm_slli_si128(v, 4 * k);
  }
  static V last(V v) { return _mm_shuffle_epi32(v, 0xFF); }
  static V scan(V v) {
    const V a = add(v, shift<1>(v));
    return add(a, shift<2>(a));
  }
};

#include "scan_blocks.inl"

// Vectorised piece scan (see the file comment): the AVX-512 or AVX2 pass where this variant has
// one (vector_bytes 64 or 32), then SSE2 for what it left; returns the sum of ahead[0, ahead_n),
// which it reads along the way. `streamed` writes with streaming stores, which need out aligned
// to the vector: the elements before that go through the scalar loop.
template <bool inclusive, class Acc, class T>
Acc piece_scan(const T* x, T* out, std::int64_t n, Acc offset, bool streamed, int vector_bytes,
               ReadPrefetch pf = kScanPrefetchTable, const T* ahead = nullptr, std::int64_t ahead_n = 0) {
  std::int64_t head = 0;
  if (streamed) {
    const auto align = static_cast<std::int64_t>(vector_bytes);
    const auto misalign = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(out) % align);
    head = std::min<std::int64_t>(n, misalign == 0 ? 0 : (align - misalign) / static_cast<std::int64_t>(sizeof(T)));
  }
  Acc running = scalar_scan<inclusive>(x, out, head, offset);
  Acc ahead_sum = 0;
  std::int64_t i = head;
#if defined(TANDEM_X86_KERNELS)
  if (vector_bytes == 64) {
    i += scan_blocks_avx512(inclusive, x + i, out + i, n - i, running, streamed, pf, ahead, ahead_n, ahead_sum);
  } else if (vector_bytes == 32) {
    i += scan_blocks_avx2(inclusive, x + i, out + i, n - i, running, streamed, pf, ahead, ahead_n, ahead_sum);
  }
#endif
  i += scan_blocks<Vec<Acc>>(inclusive, x + i, out + i, n - i, running, streamed, pf, ahead, ahead_n, ahead_sum);
  scalar_scan<inclusive>(x + i, out + i, n - i, running);
  return ahead_sum + stream_sum<Acc>(ahead, ahead_n);
}

#else

constexpr int kChains = 8;

template <bool inclusive, class Acc, class T>
Acc piece_scan(const T* x, T* out, std::int64_t n, Acc offset, bool, int, ReadPrefetch = kScanPrefetchTable,
               const T* ahead = nullptr, std::int64_t ahead_n = 0) {
  // Chains start len elements apart. A len whose byte stride is a multiple of 4 KiB would put
  // all 16 streams (8 read, 8 written) in the same L1 sets; shortening it by one cache line
  // spreads them out (the remainder goes to the sequential tail).
  std::int64_t len = n / kChains;
  if (len > 64) len -= 64 / static_cast<std::int64_t>(sizeof(T));
  Acc start[kChains];
  Acc running = offset;
  for (int c = 0; c < kChains; ++c) {  // offsets of the sub-chunks
    start[c] = running;
    for (std::int64_t j = 0; j < len; ++j) running += Acc(x[c * len + j]);
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
  scalar_scan<inclusive>(x + kChains * len, out + kChains * len, n - kChains * len, running);
  return stream_sum<Acc>(ahead, ahead_n);
}

#endif

inline void spin_pause() {
#if defined(__SSE2__)
  _mm_pause();
#endif
}

// How many phases of a scan one thread has finished, on a cache line of its own; others wait for
// a count with wait_for (spinning, then yielding: more threads than cores must not spin away the
// time slice of the thread they wait for).
struct alignas(64) PhaseCounter {
  std::atomic<std::int64_t> phases{0};
  void finish(std::int64_t count) { phases.store(count, std::memory_order_release); }
  void wait_for(std::int64_t count) const {
    for (int spins = 0; phases.load(std::memory_order_acquire) < count; ++spins) {
      if (spins < 4096) {
        spin_pause();
      } else {
        std::this_thread::yield();
      }
    }
  }
};

template <bool inclusive, class T>
void scan_impl(const T* x, T* out, std::int64_t n, std::size_t stream_from, ReadPrefetch pf) {
  using Acc = typename SumAcc<T>::type;
  // An output that is not the input, the two too large to stay cached, goes around the caches.
  const bool streamed = (out + n <= x || x + n <= out) && 2 * static_cast<std::size_t>(n) * sizeof(T) >= stream_from;
  // The widest pass this variant has (kernels_<isa>.cpp): AVX-512, AVX2, or SSE2 alone.
  constexpr int vector_bytes = TANDEM_ISA_AVX512 ? 64 : TANDEM_ISA_AVX2 ? 32 : 16;
  if (n < static_cast<std::int64_t>(parallel_from())) {
    piece_scan<inclusive, Acc>(x, out, n, Acc(0), false, vector_bytes);
    return;
  }
  const int max_threads = omp_get_max_threads();
  // Sums of the pieces in a ring of kSlots super-blocks (slot k % kSlots: super-block k's), and
  // how many phases each thread has finished (phase 0 sums its piece of super-block 0; phase
  // k + 1 scans super-block k and sums the next one). No barrier: a thread scanning super-block k
  // needs its pieces' sums from the threads before it (their phase k done) and super-block
  // k - 1's from the others (phase k - 1 done) to move the running total on, so the threads stay
  // within one phase of each other and the ring of four never overwrites a sum still needed. A
  // barrier per super-block would make every thread wait for the slowest at each one.
  constexpr int kSlots = 4;
  std::vector<Acc> partial(kSlots * static_cast<std::size_t>(max_threads));
  std::vector<PhaseCounter> done(static_cast<std::size_t>(max_threads));
  auto slot = [&](std::int64_t k) { return partial.data() + (k % kSlots) * max_threads; };
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), threads = omp_get_num_threads();
    const std::int64_t stride = threads * kPiece;
    auto piece_begin = [&](std::int64_t base) { return std::min(n, base + t * kPiece); };
    std::int64_t begin = piece_begin(0), end = std::min(n, begin + kPiece);
    slot(0)[t] = stream_sum<Acc>(x + begin, end - begin);
    done[static_cast<std::size_t>(t)].finish(1);
    Acc carry = 0;  // the sum of the super-blocks before this one
    for (std::int64_t base = 0, k = 0; base < n; base += stride, ++k) {
      for (int u = 0; u < threads; ++u) done[static_cast<std::size_t>(u)].wait_for(u < t ? k + 1 : k);
      if (k > 0) {
        for (int u = 0; u < threads; ++u) carry += slot(k - 1)[u];
      }
      Acc offset = carry;
      for (int u = 0; u < t; ++u) offset += slot(k)[u];
      const std::int64_t next = piece_begin(base + stride), next_end = std::min(n, next + kPiece);
      slot(k + 1)[t] = piece_scan<inclusive, Acc>(x + begin, out + begin, end - begin, offset, streamed, vector_bytes,
                                                  pf, x + next, next_end - next);
      done[static_cast<std::size_t>(t)].finish(k + 2);
      begin = next;
      end = next_end;
    }
#if defined(__SSE2__)
    if (streamed) _mm_sfence();  // streaming stores are weakly ordered
#endif
  }
}

void scan(ScanKind kind, DType t, std::size_t n, const void* x, void* out, std::size_t stream_from, ReadPrefetch pf) {
  host::dispatch_numeric(t, [&]<class T>() {
    const auto* in = static_cast<const T*>(x);
    auto* o = static_cast<T*>(out);
    const auto count = static_cast<std::int64_t>(n);
    kind == ScanKind::inclusive ? scan_impl<true>(in, o, count, stream_from, pf)
                                : scan_impl<false>(in, o, count, stream_from, pf);
  });
}
