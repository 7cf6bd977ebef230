// The kokkos backend's kernels: free function templates over raw pointers (parallel_for,
// parallel_reduce, parallel_scan, and the matmul tiers as RangePolicy / TeamPolicy loops), kept in
// a named namespace so that, under nvcc, their KOKKOS_LAMBDAs are not inside generic lambdas
// (which extended lambdas may not be). Included by kokkos_backend.cpp only.
#pragma once

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "../../core/dispatch.hpp"
#include "tandem/backend.hpp"
#include "tandem/detail/apply_op.hpp"
#include "tandem/detail/scalar_math.hpp"

namespace tandem::kokkos_backend {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;
using Range = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;
constexpr bool kHostMemory = Kokkos::SpaceAccessibility<Kokkos::HostSpace, Mem>::accessible;

// An element of storage type T in the compute type C, and back (f16 and bf16 through float).
template <class C, class T>
KOKKOS_INLINE_FUNCTION C to(T v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return C(T::to_float(v.bits));
  } else {
    return C(v);
  }
}

// ---- streaming stores ----
// On a host space with SSE2 a large output that is no input is written with streaming stores: no
// read of each line before it is written (an add moves 3 streams, not 4) and no eviction of the
// caches' data. The backend decides (stream_output): past the last-level cache, 16-byte aligned.
#if defined(__SSE2__) && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12))
#define TANDEM_KOKKOS_STREAM 1
#include <emmintrin.h>
#endif
constexpr int kLine = 64;  // bytes written at once
// An index of a host kernel over chunks; chunks_of(n) of them, chunk c ending at chunk_end(c, n).
constexpr std::int64_t kChunk = 4096;
KOKKOS_INLINE_FUNCTION std::int64_t chunks_of(std::int64_t n) { return (n + kChunk - 1) / kChunk; }
KOKKOS_INLINE_FUNCTION std::int64_t chunk_end(std::int64_t c, std::int64_t n) {
  return c * kChunk + kChunk < n ? c * kChunk + kChunk : n;
}
// The kLine bytes at `from` to `to` (16-byte aligned), around the caches.
inline void stream_line(void* to, const void* from) {
#ifdef TANDEM_KOKKOS_STREAM
  for (int k = 0; k < kLine / 16; ++k) {
    __m128i v;
    std::memcpy(&v, static_cast<const char*>(from) + 16 * k, 16);
    _mm_stream_si128(static_cast<__m128i*>(to) + k, v);
  }
#else
  std::memcpy(to, from, kLine);
#endif
}
// The thread's streaming stores ordered before what it does next.
inline void stream_fence() {
#ifdef TANDEM_KOKKOS_STREAM
  _mm_sfence();
#endif
}
inline bool can_stream(const void* out) {
#ifdef TANDEM_KOKKOS_STREAM
  return reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
#else
  (void)out;
  return false;
#endif
}
// out[i] = f(i) over chunk c and chunk c + q of [0, n), side by side a line of each at a time
// when both are whole (two streams per thread keep more reads in flight than one), each line
// computed, then written (streamed with Stream). A line is read whole before it is written, so
// out may be an input.
template <bool Stream, class T, class F>
KOKKOS_INLINE_FUNCTION void write_pair(std::int64_t c, std::int64_t q, std::int64_t n, T* out, const F& f) {
  constexpr int kPer = int(kLine / sizeof(T));
  const auto put = [](T* to, const T* line) {
    if constexpr (Stream) {
      stream_line(to, line);
    } else {
      std::memcpy(to, line, kLine);
    }
  };
  if ((c + q + 1) * kChunk <= n) {
    const std::int64_t b0 = c * kChunk, b1 = (c + q) * kChunk;
    for (std::int64_t i = 0; i < kChunk; i += kPer) {
      T l0[kPer], l1[kPer];
      for (int l = 0; l < kPer; ++l) {
        l0[l] = f(b0 + i + l);
        l1[l] = f(b1 + i + l);
      }
      put(out + b0 + i, l0);
      put(out + b1 + i, l1);
    }
  } else {
    for (std::int64_t k = c; k < chunks_of(n); k += q) {
      const std::int64_t end = chunk_end(k, n);
      std::int64_t i = k * kChunk;
      for (; i + kPer <= end; i += kPer) {
        T line[kPer];
        for (int l = 0; l < kPer; ++l) line[l] = f(i + l);
        put(out + i, line);
      }
      for (; i < end; ++i) out[i] = f(i);
    }
  }
  if constexpr (Stream) stream_fence();
}
// out[i] = f(i) for i in [0, n): on a host space in pairs of chunks (write_pair), with streaming
// stores where `stream`; on a GPU one element per index.
template <class T, class F>
void write_each(const char* label, std::int64_t n, T* out, bool stream, F f) {
  if constexpr (kHostMemory) {
    const std::int64_t q = (chunks_of(n) + 1) / 2;
    if (stream) {
      Kokkos::parallel_for(
          label, Range(0, q), KOKKOS_LAMBDA(std::int64_t c) { write_pair<true>(c, q, n, out, f); });
    } else {
      Kokkos::parallel_for(
          label, Range(0, q), KOKKOS_LAMBDA(std::int64_t c) { write_pair<false>(c, q, n, out, f); });
    }
  } else {
    Kokkos::parallel_for(
        label, Range(0, n), KOKKOS_LAMBDA(std::int64_t i) { out[i] = f(i); });
  }
}

// ---- elementwise ----
// The op's row (tandem/op_table.hpp) is a template argument, so that each loop is compiled for
// one op; visit picks the row.
template <class T, class Row>
struct BinaryAt {
  const T* x;
  const T* y;
  KOKKOS_INLINE_FUNCTION T operator()(std::int64_t i) const { return Row::template apply<T>(x[i], y[i]); }
};
template <class T, class Row>
struct UnaryAt {
  const T* x;
  KOKKOS_INLINE_FUNCTION T operator()(std::int64_t i) const { return Row::template apply<T>(x[i]); }
};
template <class T>
struct Scaled {
  const T* x;
  T alpha;
  KOKKOS_INLINE_FUNCTION T operator()(std::int64_t i) const { return alpha * x[i]; }
};
template <class T>
struct Axpy {
  const T* x;
  const T* y;
  T alpha;
  KOKKOS_INLINE_FUNCTION T operator()(std::int64_t i) const { return alpha * x[i] + y[i]; }
};
template <class T>
struct Constant {
  T value;
  KOKKOS_INLINE_FUNCTION T operator()(std::int64_t) const { return value; }
};
template <class T>
void binary(BinaryOp op, std::int64_t n, const T* x, const T* y, T* out, bool stream) {
  visit(op, [&]<class Row>(Row) { write_each("tandem::binary", n, out, stream, BinaryAt<T, Row>{x, y}); });
}
template <class T>
void unary(UnaryOp op, std::int64_t n, const T* x, T* out, bool stream) {
  visit(op, [&]<class Row>(Row) { write_each("tandem::unary", n, out, stream, UnaryAt<T, Row>{x}); });
}
template <class T>
void axpy(std::int64_t n, T alpha, const T* x, T* y) {
  write_each("tandem::axpy", n, y, false, Axpy<T>{x, y, alpha});
}
template <class T>
void scale(std::int64_t n, T alpha, const T* x, T* out, bool stream) {
  write_each("tandem::scale", n, out, stream, Scaled<T>{x, alpha});
}
template <class T>
void fill(std::int64_t n, T value, T* out, bool stream) {
  write_each("tandem::fill", n, out, stream, Constant<T>{value});
}
template <class T>
void add_row_vector(std::int64_t rows, std::int64_t cols, const T* x, std::int64_t ldx, const T* bias, T* out,
                    std::int64_t ldo) {
  Kokkos::parallel_for(
      "tandem::add_row_vector", Range(0, rows * cols), KOKKOS_LAMBDA(std::int64_t e) {
        const std::int64_t r = e / cols, c = e % cols;
        out[r * ldo + c] = x[r * ldx + c] + bias[c];
      });
}
template <class T>
void matrix_add(std::int64_t rows, std::int64_t cols, T alpha, const T* a, std::int64_t lda, T beta, const T* b,
                std::int64_t ldb, T* c, std::int64_t ldc) {
  Kokkos::parallel_for(
      "tandem::matrix_add", Range(0, rows * cols), KOKKOS_LAMBDA(std::int64_t e) {
        const std::int64_t r = e / cols, j = e % cols;
        c[r * ldc + j] = alpha * a[r * lda + j] + beta * b[r * ldb + j];
      });
}
template <class T>
void transpose(std::int64_t rows, std::int64_t cols, const T* a, std::int64_t lda, T* out, std::int64_t ldo) {
  Kokkos::parallel_for(
      "tandem::transpose", Range(0, rows * cols), KOKKOS_LAMBDA(std::int64_t e) {
        const std::int64_t r = e / cols, c = e % cols;
        out[c * ldo + r] = a[r * lda + c];
      });
}
template <class T>
void gather_rows(std::int64_t rows, std::int64_t cols, const std::int32_t* index, std::int64_t x_rows, const T* x,
                 std::int64_t ldx, T* out, std::int64_t ldo, T missing) {
  Kokkos::parallel_for(
      "tandem::gather_rows", Range(0, rows * cols), KOKKOS_LAMBDA(std::int64_t e) {
        const std::int64_t r = e / cols, c = e % cols;
        const std::int64_t src = index[r];
        out[r * ldo + c] = src >= 0 && src < x_rows ? x[src * ldx + c] : missing;
      });
}
template <class S, class D>
void convert(std::int64_t n, const S* x, D* out) {
  Kokkos::parallel_for(
      "tandem::convert", Range(0, n), KOKKOS_LAMBDA(std::int64_t i) { out[i] = math::convert_value<D>(x[i]); });
}

// ---- reductions ----
// On a host execution space an index of a reduction or scan is a chunk of kChunk elements, folded
// in kLanes independent accumulators that the compiler vectorises: one running value per thread
// is bound by the latency of an addition, a fraction of the memory's speed. On a GPU an index is
// one element, which coalesces. Either way Kokkos' parallel_reduce / parallel_scan combine the threads.
template <class Acc>
constexpr int kLanes = int(256 / sizeof(Acc));  // 16 SSE / 8 AVX registers of accumulators

struct Add {
  template <class A>
  KOKKOS_INLINE_FUNCTION static void join(A& a, A b) {
    a += b;
  }
};
struct Larger {
  template <class A>
  KOKKOS_INLINE_FUNCTION static void join(A& a, A b) {
    a = b > a ? b : a;
  }
};
struct Smaller {
  template <class A>
  KOKKOS_INLINE_FUNCTION static void join(A& a, A b) {
    a = b < a ? b : a;
  }
};

// f(i) for i in [begin, end) folded by Join, starting from init (Join's identity).
template <class Acc, class Join, class F>
KOKKOS_INLINE_FUNCTION Acc fold(std::int64_t begin, std::int64_t end, Acc init, const F& f) {
  constexpr int kL = kLanes<Acc>;
  Acc lanes[kL];
  for (int l = 0; l < kL; ++l) lanes[l] = init;
  std::int64_t i = begin;
  for (; i + kL <= end; i += kL) {
    for (int l = 0; l < kL; ++l) Join::join(lanes[l], Acc(f(i + l)));
  }
  Acc total = init;
  for (; i < end; ++i) Join::join(total, Acc(f(i)));
  for (int l = 0; l < kL; ++l) Join::join(total, lanes[l]);
  return total;
}
// The sum of f over chunks c, c + q, c + 2q and c + 3q of [0, n), those that exist, read side by
// side: each thread then reads kStreams streams from memory, not one, which keeps more requests
// in flight.
constexpr int kStreams = 4;  // Zen 3 EPYC, sum of 16M f32: 1.4 ms, one stream 2.4
template <class Acc, class F>
KOKKOS_INLINE_FUNCTION Acc fold_streams(std::int64_t c, std::int64_t q, std::int64_t n, const F& f) {
  Acc total = 0;
  if ((c + (kStreams - 1) * q + 1) * kChunk > n) {  // a stream is short or missing: one at a time
    for (int s = 0; s < kStreams && (c + s * q) * kChunk < n; ++s) {
      total += fold<Acc, Add>((c + s * q) * kChunk, chunk_end(c + s * q, n), Acc(0), f);
    }
    return total;
  }
  constexpr int kL = kLanes<Acc> / kStreams;
  Acc lanes[kStreams][kL] = {};
  for (std::int64_t i = 0; i < kChunk; i += kL) {
    for (int s = 0; s < kStreams; ++s) {
      for (int l = 0; l < kL; ++l) lanes[s][l] += Acc(f((c + s * q) * kChunk + i + l));
    }
  }
  for (const auto& stream : lanes) {
    for (Acc l : stream) total += l;
  }
  return total;
}

// The sum of f(i) over [0, n) in Acc (unsigned for i32: wrapping, as every backend sums integers).
template <class Acc, class F>
Acc sum_of(const char* label, std::int64_t n, F f) {
  Acc total = 0;
  if constexpr (kHostMemory) {
    const std::int64_t q = (chunks_of(n) + kStreams - 1) / kStreams;
    Kokkos::parallel_reduce(
        label, Range(0, q), KOKKOS_LAMBDA(std::int64_t c, Acc & a) { a += fold_streams<Acc>(c, q, n, f); }, total);
  } else {
    Kokkos::parallel_reduce(
        label, Range(0, n), KOKKOS_LAMBDA(std::int64_t i, Acc & a) { a += f(i); }, total);
  }
  return total;
}
// The extreme of f(i) over [0, n) by Kokkos' Max or Min reducer.
template <class T, bool IsMax, class F>
T extreme_of(std::int64_t n, F f) {
  using Join = std::conditional_t<IsMax, Larger, Smaller>;
  using Reducer = std::conditional_t<IsMax, Kokkos::Max<T>, Kokkos::Min<T>>;
  const T identity = IsMax ? Kokkos::reduction_identity<T>::max() : Kokkos::reduction_identity<T>::min();
  T best = identity;
  if constexpr (kHostMemory) {
    Kokkos::parallel_reduce(
        "tandem::extreme", Range(0, chunks_of(n)),
        KOKKOS_LAMBDA(std::int64_t c, T & b) {
          Join::join(b, fold<T, Join>(c * kChunk, chunk_end(c, n), identity, f));
        },
        Reducer(best));
  } else {
    Kokkos::parallel_reduce(
        "tandem::extreme", Range(0, n), KOKKOS_LAMBDA(std::int64_t i, T & b) { Join::join(b, f(i)); }, Reducer(best));
  }
  return best;
}
template <class T>
struct Plain {
  const T* x;
  KOKKOS_INLINE_FUNCTION T operator()(std::int64_t i) const { return x[i]; }
};
template <class T>
struct AsUnsigned {
  const T* x;
  KOKKOS_INLINE_FUNCTION unsigned operator()(std::int64_t i) const { return static_cast<unsigned>(x[i]); }
};
template <class T>
struct Squares {
  const T* x;
  KOKKOS_INLINE_FUNCTION double operator()(std::int64_t i) const { return double(x[i]) * double(x[i]); }
};
template <class T>
struct Products {
  const T* x;
  const T* y;
  KOKKOS_INLINE_FUNCTION T operator()(std::int64_t i) const { return x[i] * y[i]; }
};
template <class T>
struct SquaredDifferences {
  const T* a;
  const T* b;
  KOKKOS_INLINE_FUNCTION T operator()(std::int64_t i) const {
    const T d = a[i] - b[i];
    return d * d;
  }
};
template <class T>
struct IsNan {  // 1 where x[i] is NaN
  const T* x;
  KOKKOS_INLINE_FUNCTION std::int32_t operator()(std::int64_t i) const { return x[i] != x[i]; }
};
template <class T>
struct Equals {  // 1 where x[i] == value
  const T* x;
  T value;
  KOKKOS_INLINE_FUNCTION std::int32_t operator()(std::int64_t i) const { return x[i] == value; }
};
// How many i in [0, n) have f(i) == 1 (chunks count in 32 bits).
template <class F>
std::int64_t count_of(const char* label, std::int64_t n, F f) {
  std::int64_t count = 0;
  if constexpr (kHostMemory) {
    Kokkos::parallel_reduce(
        label, Range(0, chunks_of(n)),
        KOKKOS_LAMBDA(std::int64_t c, std::int64_t & a) {
          a += fold<std::int32_t, Add>(c * kChunk, chunk_end(c, n), 0, f);
        },
        count);
  } else {
    Kokkos::parallel_reduce(
        label, Range(0, n), KOKKOS_LAMBDA(std::int64_t i, std::int64_t & a) { a += f(i); }, count);
  }
  return count;
}

// How many NaN x holds (0 for integers).
template <class T>
std::int64_t nan_count(std::int64_t n, const T* x) {
  if constexpr (std::is_integral_v<T>) {
    (void)n, (void)x;
    return 0;
  } else {
    return count_of("tandem::nan_count", n, IsNan<T>{x});
  }
}
// The largest (IsMax) or smallest element of x, which holds no NaN.
template <class T, bool IsMax>
T extreme(std::int64_t n, const T* x) {
  const T best = extreme_of<T, IsMax>(n, Plain<T>{x});
  // Kokkos' identity for Max<float> is -FLT_MAX, not -Inf (Min: +FLT_MAX): x holding -Inf alone
  // comes back as -FLT_MAX. Where the identity comes back, counting the infinities tells.
  if constexpr (std::is_floating_point_v<T>) {
    const T inf = IsMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    if (best == (IsMax ? Kokkos::reduction_identity<T>::max() : Kokkos::reduction_identity<T>::min()) &&
        count_of("tandem::infinities", n, Equals<T>{x, inf}) == n) {
      return inf;
    }
  }
  return best;
}
// The first index i with x[i] == value, or with x[i] NaN when `nan`.
template <class T>
std::int64_t first_index(std::int64_t n, const T* x, T value, bool nan) {
  std::int64_t first = n;
  Kokkos::parallel_reduce(
      "tandem::argmax", Range(0, n),
      KOKKOS_LAMBDA(std::int64_t i, std::int64_t & f) {
        const bool hit = nan ? x[i] != x[i] : x[i] == value;
        if (hit && i < f) f = i;
      },
      Kokkos::Min<std::int64_t>(first));
  return first;
}

template <class T, bool IsMax>
void reduce_axis(std::int64_t rows, std::int64_t cols, const T* x, std::int64_t row_stride, std::int64_t col_stride,
                 T* out) {
  Kokkos::parallel_for(
      "tandem::reduce_axis", Range(0, rows), KOKKOS_LAMBDA(std::int64_t r) {
        const T* row = x + r * row_stride;
        if constexpr (IsMax) {
          T best = row[0];
          for (std::int64_t c = 1; c < cols; ++c) best = math::nan_max(best, row[c * col_stride]);
          out[r] = best;
        } else if constexpr (std::is_same_v<T, std::int32_t>) {
          unsigned acc = 0;
          for (std::int64_t c = 0; c < cols; ++c) acc += static_cast<unsigned>(row[c * col_stride]);
          out[r] = static_cast<std::int32_t>(acc);
        } else {
          T acc = 0;
          for (std::int64_t c = 0; c < cols; ++c) acc += row[c * col_stride];
          out[r] = acc;
        }
      });
}

// ---- losses ----
template <class T>
void softmax_cross_entropy(std::int64_t rows, std::int64_t cols, const T* logits, std::int64_t ld_logits,
                           const std::int32_t* labels, T* probs, std::int64_t ld_probs, T* losses) {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  Kokkos::parallel_for(
      "tandem::softmax_cross_entropy", Range(0, rows), KOKKOS_LAMBDA(std::int64_t r) {
        const T* x = logits + r * ld_logits;
        T* p = probs + r * ld_probs;
        T m = x[0];
        for (std::int64_t c = 1; c < cols; ++c) m = math::nan_max(m, x[c]);
        T s = 0;
        for (std::int64_t c = 0; c < cols; ++c) s += std::exp(x[c] - m);
        for (std::int64_t c = 0; c < cols; ++c) p[c] = std::exp(x[c] - m) / s;
        const std::int32_t label = labels[r];
        losses[r] = (label >= 0 && label < cols) ? std::log(s) - (x[label] - m) : nan;
      });
}

}  // namespace tandem::kokkos_backend
