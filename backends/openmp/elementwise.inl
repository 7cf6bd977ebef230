// The elementwise kernels and small matrix ops (included by kernels.inl, once per ISA): one
// parallel, vectorisable loop each, at memory bandwidth. The outputs of ops that move more than
// the last-level cache holds (inputs and output together) are written with non-temporal
// (streaming) stores where store_tuning() says so: they cannot stay cached anyway, and a normal
// store first reads every line it writes (write-allocate), which costs add a third more memory
// traffic (see map_into).

// out[i] = f(i) over [0, n), parallel when large. f must be a cheap, pure element function.
template <class F>
inline void for_each_index(std::size_t n, F&& f) {
  const auto count = static_cast<std::int64_t>(n);
  if (n < parallel_from()) {
#pragma omp simd
    for (std::int64_t i = 0; i < count; ++i) f(i);
  } else {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < count; ++i) f(i);
  }
}

#if defined(__SSE2__)
inline void stream16(float* d, const float* s) { _mm_stream_ps(d, _mm_load_ps(s)); }
inline void stream16(double* d, const double* s) { _mm_stream_pd(d, _mm_load_pd(s)); }

// out[i] = g(i) over lines of memory: each thread walks its part as `runs` runs at once, one
// cache line from each in turn (several read streams per core keep more memory requests in
// flight than one; interleaving by whole kilobytes instead breaks the hardware prefetchers'
// line-by-line pattern; how many runs pay differs by CPU: store_tuning()). With kStream, the line's values are computed by
// the vectorised loop, then streamed out in 16-byte stores; without, they are stored in place (an
// output that is also an input, as axpy's y: its lines are read anyway, so there is no
// write-allocate to save).
template <bool kStream, class T, class G>
void map_lines(std::size_t n, T* out, G g, std::int64_t runs) {
  constexpr std::int64_t kLine = 64 / sizeof(T);
  constexpr std::int64_t kPerStore = 16 / sizeof(T);
  const std::int64_t kStreams = std::max<std::int64_t>(runs, 1);
  const auto count = static_cast<std::int64_t>(n);
  // Elements before out + head is 64-byte aligned (T* is always sizeof(T)-aligned): whole lines
  // go out as whole lines.
  const auto misalign = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(out) % 64);
  const std::int64_t head =
      std::min<std::int64_t>(count, misalign == 0 ? 0 : (64 - misalign) / static_cast<std::int64_t>(sizeof(T)));
  for (std::int64_t i = 0; i < head; ++i) out[i] = g(i);
  const std::int64_t lines = (count - head) / kLine;
#pragma omp parallel
  {
    const std::int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
    const std::int64_t first = lines * me / threads, last = lines * (me + 1) / threads;
    const std::int64_t run = (last - first) / kStreams;
    auto do_line = [&](std::int64_t l) {
      const std::int64_t at = head + l * kLine;
      if constexpr (kStream) {
        alignas(64) T line[kLine];
#pragma omp simd
        for (std::int64_t k = 0; k < kLine; ++k) line[k] = g(at + k);
        for (std::int64_t k = 0; k < kLine; k += kPerStore) stream16(out + at + k, line + k);
      } else {
#pragma omp simd
        for (std::int64_t k = 0; k < kLine; ++k) out[at + k] = g(at + k);
      }
    };
    if (!kStream && kStreams == 1) {
      // One run stored in place: the thread's lines as one loop, with no per-line bookkeeping
      // (axpy at 256 MiB on a Zen 5, six alternating rounds: a median of 0.99x PyTorch's add_ in
      // the same process, against 0.93x line by line).
      const std::int64_t from = head + first * kLine, to = head + last * kLine;
#pragma omp simd
      for (std::int64_t i = from; i < to; ++i) out[i] = g(i);
    } else {
      for (std::int64_t j = 0; j < run; ++j) {
        for (std::int64_t s = 0; s < kStreams; ++s) do_line(first + s * run + j);
      }
      for (std::int64_t l = first + kStreams * run; l < last; ++l) do_line(l);
    }
    if constexpr (kStream)
      _mm_sfence();  // streaming stores are weakly ordered: make them visible before the op returns
  }
  for (std::int64_t i = head + lines * kLine; i < count; ++i) out[i] = g(i);
}
#endif

// out[i] = g(i) over [0, n), for an op that moves `arrays` distinct arrays of n elements (its
// inputs and output; an operand given twice, as out = x + x or in place, counts once: the data
// that must fit in the cache is that much smaller). Where those are at least stream_from bytes
// together (more than the last-level cache holds), the output goes by lines in interleaved runs;
// `fresh` says out overlaps no input: only then may it be streamed (an output that is also an
// input is in cache line by line as it is read), where store_tuning() says streaming pays on this
// CPU. g(i) may read out[i] (in place) but no other element of out.
template <class T, class G>
void map_into(std::size_t n, int arrays, T* out, bool fresh, std::size_t stream_from, G g) {
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (n >= parallel_from() && std::size_t(arrays) * n * sizeof(T) >= stream_from) {
      const StoreTuning& tune = store_tuning();
      if (fresh && tune.stream) {
        map_lines<true>(n, out, g, tune.runs);
      } else {
        map_lines<false>(n, out, g, fresh ? tune.runs : tune.update_runs);
      }
      return;
    }
  }
#else
  (void)arrays;
  (void)fresh;
  (void)stream_from;
#endif
  for_each_index(n, [=](std::int64_t i) { out[i] = g(i); });
}

// Whether [a, a + n) and [b, b + n) share any element.
template <class T>
bool overlaps(const T* a, const T* b, std::size_t n) {
  return a < b + n && b < a + n;
}

// How many distinct arrays of n elements an op with these operands moves (out first).
template <class T>
int distinct_arrays(const T* out, const T* x, const T* y = nullptr) {
  return 1 + (x != out ? 1 : 0) + (y != nullptr && y != out && y != x ? 1 : 0);
}

template <class T, class Op>
void binary_loop(std::size_t n, const T* x, const T* y, T* out, std::size_t stream_from, Op op) {
  map_into(n, distinct_arrays<T>(out, x, y), out, !overlaps<T>(out, x, n) && !overlaps<T>(out, y, n), stream_from,
           [=](std::int64_t i) { return op(x[i], y[i]); });
}

template <class T, class Op>
void unary_loop(std::size_t n, const T* x, T* out, std::size_t stream_from, Op op) {
  map_into(n, distinct_arrays<T>(out, x), out, !overlaps<T>(out, x, n), stream_from,
           [=](std::int64_t i) { return op(x[i]); });
}

// On the calibration's arrays (CalibrationArrays), one window per run.
std::vector<StoreVariant> measure_store_variants(const CalibrationArrays& arrays, int reps) {
  std::vector<StoreVariant> out;
#if defined(__SSE2__)
  const float s = 0.5f;
  // Every variant: plain and streaming stores into a fresh output, and in place, in 1, 2 and 4
  // runs per thread.
  for (const int runs : {1, 2, 4}) {
    out.push_back({false, false, runs, 0});
    out.push_back({true, false, runs, 0});
    out.push_back({false, true, runs, 0});
  }
  const std::size_t n = arrays.window;
  std::size_t done = 0;
  auto run = [&](std::size_t k) {
    const StoreVariant& v = out[k];
    const std::size_t at = arrays.offset(done++);
    float* a = arrays.a + at;
    const float* b = arrays.b + at;
    const float* c = arrays.c + at;
    if (v.in_place) {
      map_lines<false>(
          n, a, [=](std::int64_t i) { return a[i] + s * c[i]; }, v.runs);
    } else if (v.stream) {
      map_lines<true>(
          n, a, [=](std::int64_t i) { return b[i] + s * c[i]; }, v.runs);
    } else {
      map_lines<false>(
          n, a, [=](std::int64_t i) { return b[i] + s * c[i]; }, v.runs);
    }
  };
  const std::vector<double> best = fastest_in_rotating_rounds(out.size(), reps, run);
  for (std::size_t v = 0; v < out.size(); ++v) out[v].gbs = 3.0 * double(n * sizeof(float)) / best[v] / 1e9;
#else
  (void)arrays;
  (void)reps;
#endif
  return out;
}

void binary(BinaryOp op, DType t, std::size_t n, const void* x, const void* y, void* out, std::size_t stream_from) {
  dispatch_float(t, [&]<class T>() {
    const T* a = static_cast<const T*>(x);
    const T* b = static_cast<const T*>(y);
    T* o = static_cast<T*>(out);
    visit(op, [&]<class Row>(Row) {
      binary_loop(n, a, b, o, stream_from, [](T u, T v) { return Row::template apply<T>(u, v); });
    });
  });
}

void unary(UnaryOp op, DType t, std::size_t n, const void* x, void* out, std::size_t stream_from) {
  dispatch_float(t, [&]<class T>() {
    const T* a = static_cast<const T*>(x);
    T* o = static_cast<T*>(out);
    visit(op, [&]<class Row>(Row) { unary_loop(n, a, o, stream_from, [](T u) { return Row::template apply<T>(u); }); });
  });
}

void axpy(DType t, std::size_t n, double alpha, const void* x, void* y, std::size_t stream_from) {
  dispatch_float(t, [&]<class T>() {
    const T a = T(alpha);
    const T* xs = static_cast<const T*>(x);
    T* ys = static_cast<T*>(y);
    map_into(n, distinct_arrays<T>(ys, xs), ys, false, stream_from, [=](std::int64_t i) { return a * xs[i] + ys[i]; });
  });
}

void scale(DType t, std::size_t n, double alpha, const void* x, void* out, std::size_t stream_from) {
  dispatch_float(t, [&]<class T>() {
    const T a = T(alpha);
    const T* xs = static_cast<const T*>(x);
    T* o = static_cast<T*>(out);
    map_into(n, distinct_arrays<T>(o, xs), o, !overlaps<T>(o, xs, n), stream_from,
             [=](std::int64_t i) { return a * xs[i]; });
  });
}

void fill(DType t, std::size_t n, double value, void* out, std::size_t stream_from) {
  dispatch_any(t, [&]<class T>() {
    const T v = from<T>(value);
    T* o = static_cast<T*>(out);
    map_into(n, 1, o, true, stream_from, [=](std::int64_t) { return v; });
  });
}

void add_row_vector(DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx, const void* bias,
                    void* out, std::int64_t ldo) {
  dispatch_float(t, [&]<class T>() {
    const T* xs = static_cast<const T*>(x);
    const T* b = static_cast<const T*>(bias);
    T* o = static_cast<T*>(out);
#pragma omp parallel for schedule(static) if (static_cast <std::size_t>(rows * cols) >= parallel_from())
    for (std::int64_t r = 0; r < rows; ++r) {
#pragma omp simd
      for (std::int64_t c = 0; c < cols; ++c) o[r * ldo + c] = xs[r * ldx + c] + b[c];
    }
  });
}

void bias_activation(DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx, const void* bias,
                     UnaryOp act, void* z, std::int64_t ldz, void* out, std::int64_t ldo) {
  dispatch_float(t, [&]<class T>() {
    const T* xs = static_cast<const T*>(x);
    const T* b = static_cast<const T*>(bias);
    T* zs = static_cast<T*>(z);
    T* o = static_cast<T*>(out);
    // One pass: each row is read once and written once (twice with z).
    auto run = [&](auto f) {
#pragma omp parallel for schedule(static) if (static_cast <std::size_t>(rows * cols) >= parallel_from())
      for (std::int64_t r = 0; r < rows; ++r) {
        if (zs != nullptr) {
#pragma omp simd
          for (std::int64_t c = 0; c < cols; ++c) {
            const T v = xs[r * ldx + c] + b[c];
            zs[r * ldz + c] = v;
            o[r * ldo + c] = f(v);
          }
        } else {
#pragma omp simd
          for (std::int64_t c = 0; c < cols; ++c) o[r * ldo + c] = f(xs[r * ldx + c] + b[c]);
        }
      }
    };
    visit_activation(
        act, [&]<class Row>(Row) { run([](T v) { return Row::template apply<T>(v); }); },
        [&] { throw Unsupported("bias_activation: " + std::string(name_of(act)) + " is not an activation"); });
  });
}

void matrix_add(DType t, std::int64_t rows, std::int64_t cols, double alpha, const void* a, std::int64_t lda,
                double beta, const void* b, std::int64_t ldb, void* c, std::int64_t ldc) {
  dispatch_float(t, [&]<class T>() {
    const T al = T(alpha), be = T(beta);
    const T* as = static_cast<const T*>(a);
    const T* bs = static_cast<const T*>(b);
    T* cs = static_cast<T*>(c);
#pragma omp parallel for schedule(static) if (static_cast <std::size_t>(rows * cols) >= parallel_from())
    for (std::int64_t r = 0; r < rows; ++r) {
#pragma omp simd
      for (std::int64_t j = 0; j < cols; ++j) cs[r * ldc + j] = al * as[r * lda + j] + be * bs[r * ldb + j];
    }
  });
}

void transpose(DType t, std::int64_t rows, std::int64_t cols, const void* a, std::int64_t lda, void* out,
               std::int64_t ldo) {
  // 32 x 32 tiles so that both the reads and the writes stay within a few cache lines per row.
  constexpr std::int64_t kTile = 32;
  dispatch_any(t, [&]<class T>() {
    const T* as = static_cast<const T*>(a);
    T* o = static_cast<T*>(out);
#pragma omp parallel for collapse(2) schedule(static) if (static_cast <std::size_t>(rows * cols) >= parallel_from())
    for (std::int64_t r0 = 0; r0 < rows; r0 += kTile) {
      for (std::int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const std::int64_t r1 = std::min(r0 + kTile, rows), c1 = std::min(c0 + kTile, cols);
        for (std::int64_t r = r0; r < r1; ++r) {
          for (std::int64_t c = c0; c < c1; ++c) o[c * ldo + r] = as[r * lda + c];
        }
      }
    }
  });
}

void gather_rows(DType t, std::int64_t rows, std::int64_t cols, const std::int32_t* index, std::int64_t x_rows,
                 const void* x, std::int64_t ldx, void* out, std::int64_t ldo) {
  dispatch_any(t, [&]<class T>() {
    const T missing = from<T>(std::is_same_v<T, std::int32_t> ? -1.0 : std::nan(""));
    const T* xs = static_cast<const T*>(x);
    T* o = static_cast<T*>(out);
#pragma omp parallel for schedule(static) if (static_cast <std::size_t>(rows * cols) >= parallel_from())
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t src = index[r];
      if (src >= 0 && src < x_rows) {
        std::copy_n(xs + src * ldx, cols, o + r * ldo);
      } else {
        std::fill_n(o + r * ldo, cols, missing);
      }
    }
  });
}

void convert(DType from_type, DType to_type, std::size_t n, const void* x, void* out) {
  dispatch_real(from_type, [&]<class S>() {
    dispatch_real(to_type, [&]<class D>() {
      const S* xs = static_cast<const S*>(x);
      D* o = static_cast<D*>(out);
      for_each_index(n, [=](std::int64_t i) { o[i] = math::convert_value<D>(xs[i]); });
    });
  });
}

// One pass over w, g, m and v instead of the eight of the composite default.
void adam_step(DType t, std::size_t n, const AdamParams& p, void* w, const void* g, void* m, void* v) {
  const double c1 = 1 - std::pow(p.beta1, double(p.t)), c2 = 1 - std::pow(p.beta2, double(p.t));
  dispatch_float(t, [&]<class T>() {
    const T b1 = T(p.beta1), b2 = T(p.beta2), step = T(p.learning_rate / c1), inv_c2 = T(1 / c2), eps = T(p.epsilon);
    const T keep = T(1 - p.learning_rate * p.weight_decay);
    T* ws = static_cast<T*>(w);
    const T* gs = static_cast<const T*>(g);
    T* ms = static_cast<T*>(m);
    T* vs = static_cast<T*>(v);
    for_each_index(n, [=](std::int64_t i) {
      const T gi = gs[i];
      const T mi = b1 * ms[i] + (1 - b1) * gi;
      const T vi = b2 * vs[i] + (1 - b2) * gi * gi;
      ms[i] = mi;
      vs[i] = vi;
      ws[i] = keep * ws[i] - step * mi / (std::sqrt(vi * inv_c2) + eps);
    });
  });
}
