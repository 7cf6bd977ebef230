// The kokkos backend: the Backend interface over Kokkos on its default execution space (Serial,
// OpenMP, CUDA, HIP, SYCL: whatever the Kokkos it is built against has). Memory is raw
// allocations in that space's memory space; every primitive is a parallel_for, parallel_reduce or
// parallel_scan over raw pointers, and the tiled matmul a TeamPolicy with tiles in team scratch
// memory. Kernels are free function templates in a named namespace so that, under nvcc, their
// KOKKOS_LAMBDAs are not inside generic lambdas (which extended lambdas may not be).
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../../core/dispatch.hpp"
#include "../../core/factories.hpp"
#include "../host/cpu_info.hpp"
#include "../host/host_backend.hpp"
#include "tandem/detail/apply_op.hpp"
#include "tandem/detail/scalar_math.hpp"
#include "tandem/errors.hpp"

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

// Kokkos is initialised by the first kokkos backend unless the program did it, and then finalised
// at exit; either way the backends give their memory back first.
struct Session {
  std::mutex mutex;
  std::vector<std::weak_ptr<tandem::Backend>> backends;
  bool owns = false;
  bool finalized = false;
};
Session& session() {
  static Session* s = new Session;  // never destroyed: the exit hook and late frees use it
  return *s;
}

class KokkosBackend : public tandem::Backend {  // created as detail::Owned<KokkosBackend>
 public:
  KokkosBackend() = default;
  void release_for_exit() { shutdown_memory(); }

  std::string name() const override { return "kokkos"; }
  DeviceProperties properties() const override {
    const int threads = Exec().concurrency();
    DeviceProperties p = kHostMemory ? host::cpu_properties(threads) : DeviceProperties{};
    const std::string space = std::string(Exec::name()) + " execution space, " + Mem::name() + " memory";
    p.name = "Kokkos " + std::to_string(KOKKOS_VERSION / 10000) + "." + std::to_string(KOKKOS_VERSION / 100 % 100) +
             "." + std::to_string(KOKKOS_VERSION % 100) + " (" + space + ")" + (kHostMemory ? " on " + p.name : "");
    p.kind = kHostMemory ? BackendKind::cpu : BackendKind::gpu;
    p.compute_units = threads;
    p.isa_features = {std::string("kokkos:") + Exec::name()};
    return p;
  }

  void* device_allocate(std::size_t bytes) override {
    if (session().finalized) {
      throw BackendUnavailable("backend 'kokkos': Kokkos has been finalized; no more memory can be allocated");
    }
    if (kHostMemory && bytes > host::available_memory_bytes()) return nullptr;
    try {
      return Kokkos::kokkos_malloc<Mem>("tandem", bytes == 0 ? 1 : bytes);
    } catch (const std::exception&) {
      return nullptr;  // the caching allocator frees its cache, retries, then raises OutOfMemory
    }
  }
  void device_free(void* ptr, std::size_t) override {
    if (ptr != nullptr && !session().finalized) Kokkos::kokkos_free<Mem>(ptr);
  }
  std::size_t device_free_bytes() const override { return kHostMemory ? host::available_memory_bytes() : 0; }
  void copy_to_device(Queue q, void* d_dst, const void* h_src, std::size_t bytes) override {
    copy(q, d_dst, h_src, bytes, false, true);
  }
  void copy_to_host(Queue q, void* h_dst, const void* d_src, std::size_t bytes) override {
    copy(q, h_dst, d_src, bytes, true, false);
  }
  void copy_on_device(Queue q, void* d_dst, const void* d_src, std::size_t bytes) override {
    copy(q, d_dst, d_src, bytes, false, false);
  }
  void synchronize(Queue q) override {
    check_queue(q);
    Kokkos::fence();
  }

  void binary(Queue q, BinaryOp op, DType t, std::size_t n, const void* x, const void* y, void* out) override {
    check_queue(q);
    detail::dispatch_float(t,
                           [&]<class T>() { kokkos_backend::binary<T>(op, count(n), as<T>(x), as<T>(y), as<T>(out)); });
  }
  void unary(Queue q, UnaryOp op, DType t, std::size_t n, const void* x, void* out) override {
    check_queue(q);
    detail::dispatch_float(t, [&]<class T>() { kokkos_backend::unary<T>(op, count(n), as<T>(x), as<T>(out)); });
  }
  void axpy(Queue q, DType t, std::size_t n, double alpha, const void* x, void* y) override {
    check_queue(q);
    detail::dispatch_float(t, [&]<class T>() { kokkos_backend::axpy<T>(count(n), T(alpha), as<T>(x), as<T>(y)); });
  }
  void scale(Queue q, DType t, std::size_t n, double alpha, const void* x, void* out) override {
    check_queue(q);
    detail::dispatch_float(t, [&]<class T>() { kokkos_backend::scale<T>(count(n), T(alpha), as<T>(x), as<T>(out)); });
  }
  void fill(Queue q, DType t, std::size_t n, double value, void* out) override {
    check_queue(q);
    detail::dispatch_any(t, [&]<class T>() { kokkos_backend::fill<T>(count(n), host::from<T>(value), as<T>(out)); });
  }
  void add_row_vector(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                      const void* bias, void* out, std::int64_t ldo) override {
    check_queue(q);
    detail::dispatch_float(t, [&]<class T>() {
      kokkos_backend::add_row_vector<T>(rows, cols, as<T>(x), ldx, as<T>(bias), as<T>(out), ldo);
    });
  }
  void matrix_add(Queue q, DType t, std::int64_t rows, std::int64_t cols, double alpha, const void* a, std::int64_t lda,
                  double beta, const void* b, std::int64_t ldb, void* c, std::int64_t ldc) override {
    check_queue(q);
    detail::dispatch_float(t, [&]<class T>() {
      kokkos_backend::matrix_add<T>(rows, cols, T(alpha), as<T>(a), lda, T(beta), as<T>(b), ldb, as<T>(c), ldc);
    });
  }
  void transpose(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* a, std::int64_t lda, void* out,
                 std::int64_t ldo) override {
    check_queue(q);
    detail::dispatch_any(t,
                         [&]<class T>() { kokkos_backend::transpose<T>(rows, cols, as<T>(a), lda, as<T>(out), ldo); });
  }
  void gather_rows(Queue q, DType t, std::int64_t rows, std::int64_t cols, const std::int32_t* index,
                   std::int64_t x_rows, const void* x, std::int64_t ldx, void* out, std::int64_t ldo) override {
    check_queue(q);
    detail::dispatch_any(t, [&]<class T>() {
      const T missing = host::from<T>(std::is_same_v<T, std::int32_t> ? -1.0 : std::nan(""));
      kokkos_backend::gather_rows<T>(rows, cols, index, x_rows, as<T>(x), ldx, as<T>(out), ldo, missing);
    });
  }
  void convert(Queue q, DType from, DType to_type, std::size_t n, const void* x, void* out) override {
    check_queue(q);
    detail::dispatch_real(from, [&]<class S>() {
      detail::dispatch_real(to_type, [&]<class D>() { kokkos_backend::convert<S, D>(count(n), as<S>(x), as<D>(out)); });
    });
  }

  std::vector<MatmulTier> matmul_tiers(DType) const override { return {MatmulTier::naive, MatmulTier::tiled}; }
  MatmulTier choose_matmul_tier(const GemmArgs& g) const override {
    return g.m * g.n >= 64 * 64 && g.k >= 16 ? MatmulTier::tiled : MatmulTier::naive;
  }
  void matmul(Queue q, const GemmArgs& g) override {
    check_queue(q);
    if (g.tier != MatmulTier::naive && g.tier != MatmulTier::tiled) {
      throw Unsupported("matmul: the kokkos backend has the tiers naive and tiled, not '" +
                        std::string(name_of(g.tier)) + "'");
    }
    detail::dispatch_real(g.ab_type, [&]<class TA>() {
      detail::dispatch_float(g.c_type, [&]<class TC>() {
        using C = std::conditional_t<std::is_same_v<TA, double>, double, float>;
        if (g.tier == MatmulTier::naive) {
          matmul_naive<C, TA, TC>(g);
        } else {
          matmul_tiled<C, TA, TC>(g);
        }
      });
    });
  }

  void reduce(Queue q, ReduceOp op, DType t, std::size_t n_elems, const void* x, void* result,
              std::string_view) override {
    check_queue(q);
    const std::int64_t n = count(n_elems);
    detail::dispatch_numeric(t, [&]<class T>() {
      const T* v = as<T>(x);
      switch (op) {
        case ReduceOp::sum:
          if constexpr (std::is_same_v<T, std::int32_t>) {
            store(result, static_cast<std::int32_t>(sum_of<unsigned>("tandem::sum", n, AsUnsigned<T>{v})));
          } else {
            store(result, sum_of<T>("tandem::sum", n, Plain<T>{v}));
          }
          break;
        case ReduceOp::norm2:
          if constexpr (!std::is_same_v<T, std::int32_t>) {
            store(result, T(std::sqrt(sum_of<double>("tandem::norm2", n, Squares<T>{v}))));
          }
          break;
        case ReduceOp::min:
        case ReduceOp::max: {
          if (nan_count(n, v) > 0) {
            store(result, std::numeric_limits<T>::quiet_NaN());
          } else {
            store(result, op == ReduceOp::max ? extreme<T, true>(n, v) : extreme<T, false>(n, v));
          }
          break;
        }
        case ReduceOp::argmax: {
          const bool nan = nan_count(n, v) > 0;
          const T best = nan ? T(0) : extreme<T, true>(n, v);
          store(result, static_cast<std::int32_t>(first_index(n, v, best, nan)));
          break;
        }
      }
    });
  }
  void dot(Queue q, DType t, std::size_t n, const void* x, const void* y, void* result) override {
    check_queue(q);
    detail::dispatch_float(t, [&]<class T>() {
      store(result, sum_of<T>("tandem::dot", count(n), Products<T>{as<T>(x), as<T>(y)}));
    });
  }
  void mse(Queue q, DType t, std::size_t n, const void* a, const void* b, void* result) override {
    check_queue(q);
    detail::dispatch_float(t, [&]<class T>() {
      store(result, sum_of<T>("tandem::mse", count(n), SquaredDifferences<T>{as<T>(a), as<T>(b)}) / T(n));
    });
  }
  void reduce_rows(Queue q, ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                   void* out) override {
    check_queue(q);
    detail::dispatch_numeric(t, [&]<class T>() {
      if (op == ReduceOp::max) {
        reduce_axis<T, true>(rows, cols, as<T>(x), ldx, 1, as<T>(out));
      } else {
        reduce_axis<T, false>(rows, cols, as<T>(x), ldx, 1, as<T>(out));
      }
    });
  }
  void reduce_cols(Queue q, ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                   void* out) override {
    check_queue(q);
    // A column of x is a row of x^T: the same loop with the strides swapped.
    detail::dispatch_numeric(t, [&]<class T>() {
      if (op == ReduceOp::max) {
        reduce_axis<T, true>(cols, rows, as<T>(x), 1, ldx, as<T>(out));
      } else {
        reduce_axis<T, false>(cols, rows, as<T>(x), 1, ldx, as<T>(out));
      }
    });
  }
  void scan(Queue q, ScanKind kind, DType t, std::size_t n, const void* x, void* out, std::string_view) override {
    check_queue(q);
    detail::dispatch_numeric(
        t, [&]<class T>() { kokkos_backend::scan<T>(kind == ScanKind::inclusive, count(n), as<T>(x), as<T>(out)); });
  }
  void softmax_cross_entropy(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* logits,
                             std::int64_t ld_logits, const std::int32_t* labels, void* probs, std::int64_t ld_probs,
                             void* losses) override {
    check_queue(q);
    detail::dispatch_float(t, [&]<class T>() {
      kokkos_backend::softmax_cross_entropy<T>(rows, cols, as<T>(logits), ld_logits, labels, as<T>(probs), ld_probs,
                                               as<T>(losses));
    });
  }

 private:
  template <class T>
  static const T* as(const void* p) {
    return static_cast<const T*>(p);
  }
  template <class T>
  static T* as(void* p) {
    return static_cast<T*>(p);
  }
  static std::int64_t count(std::size_t n) { return static_cast<std::int64_t>(n); }
  // Kokkos runs one queue here: the default one (id 0).
  static void check_queue(Queue q) {
    if (q.id != 0) {
      throw InvalidArgument("queue " + std::to_string(q.id) +
                            " was not created by the kokkos backend (it has one queue)");
    }
  }
  // A scalar result, written to device memory from the host.
  template <class T>
  void store(void* result, T value) {
    copy(Queue{}, result, &value, sizeof(T), false, true);
  }
  // bytes between any two of host and device memory, through unmanaged Views.
  static void copy(Queue q, void* dst, const void* src, std::size_t bytes, bool dst_host, bool src_host) {
    check_queue(q);
    if (bytes == 0) return;
    using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
    using HostView = Kokkos::View<char*, Kokkos::HostSpace, Unmanaged>;
    using DeviceView = Kokkos::View<char*, Mem, Unmanaged>;
    auto* d = static_cast<char*>(dst);
    auto* s = static_cast<char*>(const_cast<void*>(src));
    if (dst_host && src_host) {
      std::memmove(d, s, bytes);
    } else if (dst_host) {
      Kokkos::deep_copy(HostView(d, bytes), DeviceView(s, bytes));
    } else if (src_host) {
      Kokkos::deep_copy(DeviceView(d, bytes), HostView(s, bytes));
    } else if (kHostMemory) {
      Kokkos::fence();
      std::memmove(d, s, bytes);  // Views must not overlap; memmove may
    } else {
      Kokkos::deep_copy(DeviceView(d, bytes), DeviceView(s, bytes));
    }
  }
};

// Before Kokkos is finalised (by tandem at exit, or by the program that initialised it), every
// kokkos backend still alive gives its cached memory back (a Kokkos finalize hook); buffers freed
// later only drop their handles, and new allocations raise BackendUnavailable.
void release_all() {
  Session& s = session();
  std::lock_guard lock(s.mutex);
  for (auto& weak : s.backends) {
    if (auto be = weak.lock()) static_cast<KokkosBackend&>(*be).release_for_exit();
  }
  s.finalized = true;
}

// At exit, when tandem initialised Kokkos (the hook above runs first, inside finalize).
void finalize_at_exit() {
  if (session().owns && Kokkos::is_initialized()) Kokkos::finalize();
  release_all();
}

std::shared_ptr<tandem::Backend> make() {
  Session& s = session();
  std::lock_guard lock(s.mutex);
  if (s.finalized) throw BackendUnavailable("backend 'kokkos' cannot start: Kokkos has been finalized");
  if (s.backends.empty()) {
    if (!Kokkos::is_initialized()) {
      Kokkos::initialize();
      s.owns = true;
      std::atexit(finalize_at_exit);
    }
    Kokkos::push_finalize_hook(release_all);
  }
  std::shared_ptr<KokkosBackend> be = detail::make_backend<KokkosBackend>();
  s.backends.push_back(be);
  return be;
}

}  // namespace tandem::kokkos_backend

namespace tandem::detail {
int kokkos_device_count(std::string&) { return 1; }
std::shared_ptr<Backend> make_kokkos_backend(int) { return kokkos_backend::make(); }
}  // namespace tandem::detail
