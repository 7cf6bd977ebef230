// The kokkos backend's kernels: free function templates over raw pointers (parallel_for,
// parallel_reduce, parallel_scan, and the matmul tiers as RangePolicy / TeamPolicy loops), kept in
// a named namespace so that, under nvcc, their KOKKOS_LAMBDAs are not inside generic lambdas
// (which extended lambdas may not be). Included by kokkos_backend.cpp only.
#pragma once

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
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

// ---- elementwise ----
// The op's row (tandem/op_table.hpp) is a template argument, so that each loop is compiled for
// one op; visit picks the row.
template <class T, class Row>
void binary_as(std::int64_t n, const T* x, const T* y, T* out) {
  Kokkos::parallel_for(
      "tandem::binary", Range(0, n), KOKKOS_LAMBDA(std::int64_t i) { out[i] = Row::template apply<T>(x[i], y[i]); });
}
template <class T, class Row>
void unary_as(std::int64_t n, const T* x, T* out) {
  Kokkos::parallel_for(
      "tandem::unary", Range(0, n), KOKKOS_LAMBDA(std::int64_t i) { out[i] = Row::template apply<T>(x[i]); });
}
template <class T>
void binary(BinaryOp op, std::int64_t n, const T* x, const T* y, T* out) {
  visit(op, [&]<class Row>(Row) { binary_as<T, Row>(n, x, y, out); });
}
template <class T>
void unary(UnaryOp op, std::int64_t n, const T* x, T* out) {
  visit(op, [&]<class Row>(Row) { unary_as<T, Row>(n, x, out); });
}
template <class T>
void axpy(std::int64_t n, T alpha, const T* x, T* y) {
  Kokkos::parallel_for(
      "tandem::axpy", Range(0, n), KOKKOS_LAMBDA(std::int64_t i) { y[i] = alpha * x[i] + y[i]; });
}
template <class T>
void scale(std::int64_t n, T alpha, const T* x, T* out) {
  Kokkos::parallel_for(
      "tandem::scale", Range(0, n), KOKKOS_LAMBDA(std::int64_t i) { out[i] = alpha * x[i]; });
}
template <class T>
void fill(std::int64_t n, T value, T* out) {
  Kokkos::parallel_for(
      "tandem::fill", Range(0, n), KOKKOS_LAMBDA(std::int64_t i) { out[i] = value; });
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
// Sum in Acc (unsigned for i32: wrapping, as every backend sums integers).
template <class Acc, class F>
Acc sum_of(const char* label, std::int64_t n, F f) {
  Acc total = 0;
  Kokkos::parallel_reduce(
      label, Range(0, n), KOKKOS_LAMBDA(std::int64_t i, Acc & a) { a += f(i); }, total);
  return total;
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

// How many NaN x holds (0 for integers).
template <class T>
std::int64_t nan_count(std::int64_t n, const T* x) {
  if constexpr (std::is_integral_v<T>) {
    (void)n, (void)x;
    return 0;
  } else {
    std::int64_t count = 0;
    Kokkos::parallel_reduce(
        "tandem::nan_count", Range(0, n), KOKKOS_LAMBDA(std::int64_t i, std::int64_t & c) { c += x[i] != x[i]; },
        count);
    return count;
  }
}
// The largest (IsMax) or smallest element, NaN ignored (comparisons with NaN are false).
template <class T, bool IsMax>
T extreme(std::int64_t n, const T* x) {
  T best{};  // the reducer starts from its identity
  if constexpr (IsMax) {
    Kokkos::parallel_reduce(
        "tandem::max", Range(0, n), KOKKOS_LAMBDA(std::int64_t i, T & b) { b = x[i] > b ? x[i] : b; },
        Kokkos::Max<T>(best));
  } else {
    Kokkos::parallel_reduce(
        "tandem::min", Range(0, n), KOKKOS_LAMBDA(std::int64_t i, T & b) { b = x[i] < b ? x[i] : b; },
        Kokkos::Min<T>(best));
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

// ---- scan ----
template <class T>
void scan(bool inclusive, std::int64_t n, const T* x, T* out) {
  using Acc = std::conditional_t<std::is_same_v<T, std::int32_t>, unsigned, T>;
  // out may alias x: each element is read before it is written, and Kokkos' scan reads x[i] in
  // both of its passes before the final one writes out[i].
  Kokkos::parallel_scan(
      "tandem::scan", Range(0, n), KOKKOS_LAMBDA(std::int64_t i, Acc & running, bool final) {
        const Acc v = static_cast<Acc>(x[i]);
        if (final && !inclusive) out[i] = static_cast<T>(running);
        running += v;
        if (final && inclusive) out[i] = static_cast<T>(running);
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

// ---- matmul ----
// Element (i, j) of op(A) and op(B) in the compute type.
template <class C, class TA>
KOKKOS_INLINE_FUNCTION C a_at(const TA* a, std::int64_t lda, bool trans, std::int64_t i, std::int64_t p) {
  return to<C>(trans ? a[p * lda + i] : a[i * lda + p]);
}

// naive: one thread per element of C, the dot product over k in the compute type C.
template <class C, class TA, class TC>
void matmul_naive(const GemmArgs& g) {
  const auto* a = static_cast<const TA*>(g.a);
  const auto* b = static_cast<const TA*>(g.b);
  auto* c = static_cast<TC*>(g.c);
  const std::int64_t n = g.n, k = g.k, lda = g.lda, ldb = g.ldb, ldc = g.ldc;
  const bool ta = g.trans_a == Transpose::yes, tb = g.trans_b == Transpose::yes;
  const C alpha = C(g.alpha), beta = C(g.beta);
  Kokkos::parallel_for(
      "tandem::matmul_naive", Range(0, g.m * g.n), KOKKOS_LAMBDA(std::int64_t e) {
        const std::int64_t i = e / n, j = e % n;
        C acc = 0;
        for (std::int64_t p = 0; p < k; ++p) acc += a_at<C>(a, lda, ta, i, p) * a_at<C>(b, ldb, !tb, j, p);
        TC& cij = c[i * ldc + j];
        cij = TC(beta == C(0) ? alpha * acc : alpha * acc + beta * C(cij));
      });
}

// tiled: one team per kTile x kTile tile of C; each step loads a tile of op(A) and of op(B) into
// team scratch memory, and every thread of the team accumulates its elements of C from there.
// Correct for any team size (Serial's is 1): threads stride over the tile's elements.
constexpr int kTile = 16;
template <class C, class TA, class TC>
void matmul_tiled(const GemmArgs& g) {
  using Team = Kokkos::TeamPolicy<Exec>;
  using Scratch = Kokkos::View<C**, Exec::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const auto* a = static_cast<const TA*>(g.a);
  const auto* b = static_cast<const TA*>(g.b);
  auto* c = static_cast<TC*>(g.c);
  const std::int64_t m = g.m, n = g.n, k = g.k, lda = g.lda, ldb = g.ldb, ldc = g.ldc;
  const bool ta = g.trans_a == Transpose::yes, tb = g.trans_b == Transpose::yes;
  const C alpha = C(g.alpha), beta = C(g.beta);
  const std::int64_t tiles_m = (m + kTile - 1) / kTile, tiles_n = (n + kTile - 1) / kTile;
  const std::size_t scratch = 2 * Scratch::shmem_size(kTile, kTile);
  const Team policy =
      Team(static_cast<int>(tiles_m * tiles_n), Kokkos::AUTO).set_scratch_size(0, Kokkos::PerTeam(scratch));
  Kokkos::parallel_for(
      "tandem::matmul_tiled", policy, KOKKOS_LAMBDA(const typename Team::member_type& team) {
        const std::int64_t ti = team.league_rank() / tiles_n, tj = team.league_rank() % tiles_n;
        Scratch as(team.team_scratch(0), kTile, kTile), bs(team.team_scratch(0), kTile, kTile);
        // Each thread's share of the tile's kTile * kTile outputs (all of them with one thread).
        constexpr int kMostPerThread = kTile * kTile;
        C acc[kMostPerThread];
        const int threads = team.team_size(), me = team.team_rank();
        for (int e = me, u = 0; e < kTile * kTile; e += threads, ++u) acc[u] = 0;
        for (std::int64_t p0 = 0; p0 < k; p0 += kTile) {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, kTile * kTile), [&](int e) {
            const int r = e / kTile, q = e % kTile;
            const std::int64_t i = ti * kTile + r, j = tj * kTile + r, p = p0 + q;
            as(r, q) = i < m && p < k ? a_at<C>(a, lda, ta, i, p) : C(0);
            bs(r, q) = j < n && p < k ? a_at<C>(b, ldb, !tb, j, p) : C(0);  // bs(j, p): op(B) transposed
          });
          team.team_barrier();
          for (int e = me, u = 0; e < kTile * kTile; e += threads, ++u) {
            const int r = e / kTile, q = e % kTile;
            C s = acc[u];
            for (int p = 0; p < kTile; ++p) s += as(r, p) * bs(q, p);
            acc[u] = s;
          }
          team.team_barrier();
        }
        for (int e = me, u = 0; e < kTile * kTile; e += threads, ++u) {
          const std::int64_t i = ti * kTile + e / kTile, j = tj * kTile + e % kTile;
          if (i < m && j < n) {
            TC& cij = c[i * ldc + j];
            cij = TC(beta == C(0) ? alpha * acc[u] : alpha * acc[u] + beta * C(cij));
          }
        }
      });
}

}  // namespace tandem::kokkos_backend
