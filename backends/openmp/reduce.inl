// Reductions at memory bandwidth: each thread takes one contiguous chunk and walks it as
// sub-chunks at once (kStreams read streams: four of one input, two of two), each summed into its
// own kWidth lanes (a loop the compiler turns into several vector registers, so additions do not
// wait on each other); the threads' partials are combined in order. Several streams per thread
// matter once the data comes from RAM: one sequential stream per core leaves the memory system
// idle between the prefetcher's requests (four streams per thread: a third more bytes per
// second). Each stream may also ask for its lines ahead (ReadPrefetch, prefetch.hpp: calibrated
// per CPU, as it helps some and costs others).
// min/max/argmax compare without branches and track NaN on the side, so they vectorise too.

// Lanes per stream of the min/max loops: 16 where the ISA has 32 vector registers (AVX-512: for
// f32 a zmm of lanes and one of NaN flags per stream), else 8, which keeps the f32 state of four
// streams in 8 registers of 16 (16 lanes spill there). On a 2-vCPU Zen 4 EPYC, 2 threads over 256
// MB, a standalone loop of a zmm per stream read 52-54 GB/s where this loop with 8 lanes read
// 48-51, in a phase of the VM's high bandwidth (all 33-38 in its low one).
constexpr int kLanes = TANDEM_ISA_AVX512 ? 16 : 8;
constexpr int kStreams = 4;  // concurrent read streams per thread in a sum (sub-chunks x inputs)
constexpr int kWidth = 16;   // lanes per stream
// Below this many elements per thread one stream is as fast (the data is in cache).
constexpr std::int64_t kStreamsFrom = std::int64_t(1) << 16;

// The inputs a sum reads (at most two; null: none), whose lines are prefetched ahead as `pf` says.
struct Reads {
  const void* a = nullptr;
  const void* b = nullptr;
  std::size_t elem = 0;  // bytes per element
  ReadPrefetch pf{0, false};
};

// Asks for the lines of [at, at + kWidth) elements `ahead` bytes further on into the cache of
// `Locality` (3: L1, 2: L2), as integers, not pointers: the address may be past the end, where
// prefetching is a no-op on x86.
template <int Locality>
inline void prefetch_ahead(const void* p, std::int64_t at, std::size_t elem, std::size_t bytes, std::uintptr_t ahead) {
  const std::uintptr_t from = reinterpret_cast<std::uintptr_t>(p) + std::uintptr_t(at) * elem + ahead;
  for (std::uintptr_t o = 0; o < bytes; o += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(from + o), 0, Locality);
}

// The streams of lane_sum: Runs runs of `part` elements from `begin`, at once, prefetching into
// the cache of Locality (0: no prefetch instructions; a constant, as they take it).
template <int Locality, int Runs, class Acc, class F>
void stream_sums(Acc (&lanes)[Runs][kWidth], std::int64_t begin, std::int64_t part, F f, const Reads& reads) {
  const std::size_t step = kWidth * reads.elem;
  const auto ahead = static_cast<std::uintptr_t>(reads.pf.bytes);
  for (std::int64_t j = 0; j < part; j += kWidth) {
#pragma GCC unroll 4
    for (int s = 0; s < Runs; ++s) {
      const std::int64_t at = begin + s * part + j;
      if constexpr (Locality != 0) {
        if (reads.a != nullptr) prefetch_ahead<Locality>(reads.a, at, reads.elem, step, ahead);
        if (reads.b != nullptr) prefetch_ahead<Locality>(reads.b, at, reads.elem, step, ahead);
      }
#pragma omp simd
      for (int l = 0; l < kWidth; ++l) lanes[s][l] += f(at + l);
    }
  }
}

// Sum of f(i) over [begin, end) in kWidth lanes per run, Runs runs at once. f reads Inputs arrays,
// so Runs = kStreams / Inputs keeps kStreams read streams per thread: with twice the streams a
// dot ran at 89-92% of OpenMP's own reduction loop, with the same count at 98-99% (Zen 5), while
// a sum's four beat that loop there and gained a third over one elsewhere.
template <class Acc, int Inputs = 1, class F>
Acc lane_sum(std::int64_t begin, std::int64_t end, F f, Reads reads = {}) {
  constexpr int Runs = kStreams / Inputs;
  static_assert(Runs >= 2, "the tail below adds into the second run's lanes");
  Acc lanes[Runs][kWidth] = {};
  const std::int64_t part = end - begin >= kStreamsFrom ? (end - begin) / Runs / kWidth * kWidth : 0;
  if (reads.pf.bytes == 0) {
    stream_sums<0>(lanes, begin, part, f, reads);
  } else if (reads.pf.l2) {
    stream_sums<2>(lanes, begin, part, f, reads);
  } else {
    stream_sums<3>(lanes, begin, part, f, reads);
  }
  // The rest (all of a small chunk, in cache) as one stream, still into every run's lanes:
  // Runs * kWidth independent sums keep the adds from waiting on each other (one set of lanes
  // holds an in-cache sum to one vector add per add latency).
  std::int64_t i = begin + Runs * part;
  for (; i + Runs * kWidth <= end; i += Runs * kWidth) {
#pragma GCC unroll 4
    for (int s = 0; s < Runs; ++s) {
#pragma omp simd
      for (int l = 0; l < kWidth; ++l) lanes[s][l] += f(i + s * kWidth + l);
    }
  }
  for (; i + kWidth <= end; i += kWidth) {
#pragma omp simd
    for (int l = 0; l < kWidth; ++l) lanes[0][l] += f(i + l);
  }
  for (int l = 0; i < end; ++i, ++l) lanes[1][l] += f(i);
  Acc total = 0;
  for (int s = 0; s < Runs; ++s) {
    for (int l = 0; l < kWidth; ++l) total += lanes[s][l];
  }
  return total;
}

// Runs chunk(begin, end) for one contiguous chunk per thread and returns the partials in thread
// order (a single chunk when n is small).
template <class R, class Chunk>
std::vector<R> per_thread(std::size_t n, Chunk chunk) {
  const auto count = static_cast<std::int64_t>(n);
  if (n < parallel_from()) return {chunk(0, count)};
  std::vector<R> partial(static_cast<std::size_t>(omp_get_max_threads()));
  std::size_t used = 0;
#pragma omp parallel
  {
    const int t = omp_get_thread_num(), threads = omp_get_num_threads();
    const std::int64_t per = (count + threads - 1) / threads;
    const std::int64_t begin = std::min<std::int64_t>(count, t * per), end = std::min<std::int64_t>(count, begin + per);
    partial[static_cast<std::size_t>(t)] = chunk(begin, end);
#pragma omp single
    used = static_cast<std::size_t>(threads);
  }
  partial.resize(used);
  return partial;
}

template <class T>
T sum_of(std::size_t n, const T* x, ReadPrefetch pf) {
  using Acc = typename SumAcc<T>::type;
  const auto parts = per_thread<Acc>(n, [=](std::int64_t b, std::int64_t e) {
    return lane_sum<Acc>(b, e, [=](std::int64_t i) { return Acc(x[i]); }, {x, nullptr, sizeof(T), pf});
  });
  Acc total = 0;
  for (Acc p : parts) total += p;
  return static_cast<T>(total);
}

// Squares summed in T where that is safe, else in double. For f32 the fast pass sums f32
// squares (SSE2 cannot convert to double at memory speed); its result is used when finite and at
// least 2^-40: then no square overflowed, and the squares that underflowed (each < 2^-126, at
// most 2^40 of them) change it by less than 2^-46 relative. Otherwise (values above ~1e19, all
// values tiny, or NaN) the squares are summed again in double.
template <class T>
T norm2_of(std::size_t n, const T* x, ReadPrefetch pf) {
  auto squares = [&]<class Acc>() {
    const auto parts = per_thread<Acc>(n, [=](std::int64_t b, std::int64_t e) {
      return lane_sum<Acc>(b, e, [=](std::int64_t i) { return Acc(x[i]) * Acc(x[i]); }, {x, nullptr, sizeof(T), pf});
    });
    Acc total = 0;
    for (Acc p : parts) total += p;
    return total;
  };
  if constexpr (std::is_same_v<T, float>) {
    const float fast = squares.template operator()<float>();
    if (std::isfinite(fast) && (fast >= 0x1p-40f || n == 0)) return std::sqrt(fast);
  }
  return T(std::sqrt(squares.template operator()<double>()));
}

// (max or min, NaN seen) over a chunk, branch-free.
template <class T>
struct Extreme {
  T value;
  bool nan;
  bool empty = false;  // the chunk had no elements (more threads than work)
};
template <class T, bool IsMax>
Extreme<T> extreme_chunk(const T* x, std::int64_t begin, std::int64_t end) {
  // kStreams sub-chunks at once in large chunks, as in lane_sum: one read stream per core leaves
  // memory idle between prefetches. A comparison with NaN is false, so `lanes` never take one:
  // nan_lanes remember them.
  T lanes[kStreams][kLanes];
  int nan_lanes[kStreams][kLanes] = {};
  const T init = begin < end ? x[begin] : T(0);
  for (auto& stream : lanes) std::fill(std::begin(stream), std::end(stream), init);
  auto fold = [](T& lane, int& nan, T v) {
    lane = IsMax ? (v > lane ? v : lane) : (v < lane ? v : lane);
    nan |= (v != v);
  };
  const std::int64_t part = end - begin >= kStreamsFrom ? (end - begin) / kStreams / kLanes * kLanes : 0;
  for (std::int64_t j = 0; j < part; j += kLanes) {
    for (int s = 0; s < kStreams; ++s) {
      const T* at = x + begin + s * part + j;
#pragma omp simd
      for (int l = 0; l < kLanes; ++l) fold(lanes[s][l], nan_lanes[s][l], at[l]);
    }
  }
  std::int64_t i = begin + kStreams * part;
  for (; i + kLanes <= end; i += kLanes) {
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) fold(lanes[0][l], nan_lanes[0][l], x[i + l]);
  }
  for (int l = 0; i < end; ++i, ++l) fold(lanes[0][l], nan_lanes[0][l], x[i]);
  Extreme<T> r{lanes[0][0], false, begin >= end};
  for (int s = 0; s < kStreams; ++s) {
    for (int l = 0; l < kLanes; ++l) {
      const T v = lanes[s][l];
      r.value = IsMax ? (v > r.value ? v : r.value) : (v < r.value ? v : r.value);
      r.nan = r.nan || nan_lanes[s][l] != 0 || v != v;
    }
  }
  return r;
}

template <class T, bool IsMax>
T extreme_of(std::size_t n, const T* x) {
  const auto parts =
      per_thread<Extreme<T>>(n, [=](std::int64_t b, std::int64_t e) { return extreme_chunk<T, IsMax>(x, b, e); });
  Extreme<T> r = parts[0];
  for (const auto& p : parts) {
    if (p.empty) continue;
    if (p.nan) return std::numeric_limits<T>::quiet_NaN();
    r.value = IsMax ? (p.value > r.value ? p.value : r.value) : (p.value < r.value ? p.value : r.value);
  }
  return r.nan ? std::numeric_limits<T>::quiet_NaN() : r.value;
}

// Index of the first maximum (or first NaN) in a chunk: find the extreme, then its first position.
template <class T>
std::int64_t argmax_chunk(const T* x, std::int64_t begin, std::int64_t end) {
  if (begin >= end) return -1;
  const Extreme<T> e = extreme_chunk<T, true>(x, begin, end);
  for (std::int64_t i = begin; i < end; ++i) {
    if (e.nan ? x[i] != x[i] : x[i] == e.value) return i;
  }
  return begin;
}

void reduce(ReduceOp op, DType t, std::size_t n, const void* x, void* result, ReadPrefetch pf) {
  dispatch_numeric(t, [&]<class T>() {
    const T* v = static_cast<const T*>(x);
    switch (op) {
      case ReduceOp::sum:
        *static_cast<T*>(result) = sum_of(n, v, pf);
        break;
      case ReduceOp::max:
        *static_cast<T*>(result) = extreme_of<T, true>(n, v);
        break;
      case ReduceOp::min:
        *static_cast<T*>(result) = extreme_of<T, false>(n, v);
        break;
      case ReduceOp::norm2:
        if constexpr (!std::is_same_v<T, std::int32_t>) *static_cast<T*>(result) = norm2_of(n, v, pf);
        break;
      case ReduceOp::argmax: {
        const auto parts =
            per_thread<std::int64_t>(n, [=](std::int64_t b, std::int64_t e) { return argmax_chunk(v, b, e); });
        std::int64_t best = -1;
        for (std::int64_t p : parts) {
          if (p >= 0 && (best < 0 || math::argmax_prefers(v[best], best, v[p], p))) best = p;
        }
        *static_cast<std::int32_t*>(result) = static_cast<std::int32_t>(best);
        break;
      }
    }
  });
}

void dot(DType t, std::size_t n, const void* x, const void* y, void* result, ReadPrefetch pf) {
  dispatch_float(t, [&]<class T>() {
    const T* a = static_cast<const T*>(x);
    const T* b = static_cast<const T*>(y);
    const auto parts = per_thread<T>(n, [=](std::int64_t lo, std::int64_t hi) {
      return lane_sum<T, 2>(lo, hi, [=](std::int64_t i) { return a[i] * b[i]; }, {a, b, sizeof(T), pf});
    });
    T total = 0;
    for (T p : parts) total += p;
    *static_cast<T*>(result) = total;
  });
}

void mse(DType t, std::size_t n, const void* a, const void* b, void* result, ReadPrefetch pf) {
  dispatch_float(t, [&]<class T>() {
    const T* u = static_cast<const T*>(a);
    const T* v = static_cast<const T*>(b);
    const auto parts = per_thread<T>(n, [=](std::int64_t lo, std::int64_t hi) {
      return lane_sum<T, 2>(lo, hi,
                            [=](std::int64_t i) {
                              const T d = u[i] - v[i];
                              return d * d;
                            },
                            {u, v, sizeof(T), pf});
    });
    T total = 0;
    for (T p : parts) total += p;
    *static_cast<T*>(result) = total / T(n);
  });
}

void reduce_rows(ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                 void* out) {
  dispatch_numeric(t, [&]<class T>() {
    const T* v = static_cast<const T*>(x);
    T* o = static_cast<T*>(out);
    using Acc = typename SumAcc<T>::type;
#pragma omp parallel for schedule(static) if (static_cast <std::size_t>(rows * cols) >= parallel_from())
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* row = v + r * ldx;
      if (op == ReduceOp::max) {
        const Extreme<T> e = extreme_chunk<T, true>(row, 0, cols);
        o[r] = e.nan ? std::numeric_limits<T>::quiet_NaN() : e.value;
      } else {
        o[r] = static_cast<T>(lane_sum<Acc>(0, cols, [=](std::int64_t c) { return Acc(row[c]); }));
      }
    }
  });
}

void reduce_cols(ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                 void* out) {
  // Walk rows in order, each thread owning a band of columns: contiguous, vectorised reads.
  constexpr std::int64_t kBand = 256;
  dispatch_numeric(t, [&]<class T>() {
    const T* v = static_cast<const T*>(x);
    T* o = static_cast<T*>(out);
    using Acc = typename SumAcc<T>::type;
#pragma omp parallel for schedule(static) if (static_cast <std::size_t>(rows * cols) >= parallel_from())
    for (std::int64_t c0 = 0; c0 < cols; c0 += kBand) {
      const std::int64_t width = std::min(kBand, cols - c0);
      if (op == ReduceOp::max) {
        T best[kBand];
        int nan[kBand] = {};
        for (std::int64_t c = 0; c < width; ++c) best[c] = v[c0 + c];
        for (std::int64_t r = 0; r < rows; ++r) {
          const T* row = v + r * ldx + c0;
#pragma omp simd
          for (std::int64_t c = 0; c < width; ++c) {
            best[c] = row[c] > best[c] ? row[c] : best[c];
            nan[c] |= (row[c] != row[c]);
          }
        }
        for (std::int64_t c = 0; c < width; ++c) o[c0 + c] = nan[c] ? std::numeric_limits<T>::quiet_NaN() : best[c];
      } else {
        Acc acc[kBand] = {};
        for (std::int64_t r = 0; r < rows; ++r) {
          const T* row = v + r * ldx + c0;
#pragma omp simd
          for (std::int64_t c = 0; c < width; ++c) acc[c] += Acc(row[c]);
        }
        for (std::int64_t c = 0; c < width; ++c) o[c0 + c] = static_cast<T>(acc[c]);
      }
    }
  });
}

void softmax_cross_entropy(DType t, std::int64_t rows, std::int64_t cols, const void* logits, std::int64_t ld_logits,
                           const std::int32_t* labels, void* probs, std::int64_t ld_probs, void* losses) {
  const SoftmaxKernel softmax = TANDEM_ISA_SOFTMAX();
  dispatch_float(t, [&]<class T>() {
#pragma omp parallel for schedule(static) if (static_cast <std::size_t>(rows * cols) >= parallel_from())
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* x = static_cast<const T*>(logits) + r * ld_logits;
      T* p = static_cast<T*>(probs) + r * ld_probs;
      const Extreme<T> e = extreme_chunk<T, true>(x, 0, cols);
      const T m = e.nan ? std::numeric_limits<T>::quiet_NaN() : e.value;
      // Subtracting the row max keeps exp() <= 1: no overflow for large logits. f32 rows go
      // through the vectorised exp of this CPU's ISA (softmax.inl), f64 through std::exp.
      T s = 0;
      if constexpr (std::is_same_v<T, float>) {
        s = softmax.exp_row(cols, x, m, p);
      } else {
        for (std::int64_t c = 0; c < cols; ++c) {
          p[c] = std::exp(x[c] - m);
          s += p[c];
        }
      }
      const T inv = T(1) / s;
#pragma omp simd
      for (std::int64_t c = 0; c < cols; ++c) p[c] *= inv;
      const std::int32_t label = labels[r];
      static_cast<T*>(losses)[r] =
          (label >= 0 && label < cols) ? std::log(s) - (x[label] - m) : std::numeric_limits<T>::quiet_NaN();
    }
  });
}
