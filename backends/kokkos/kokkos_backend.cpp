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
#include "kokkos_kernels.hpp"
#include "kokkos_matmul.hpp"
#include "kokkos_scan.hpp"
#include "tandem/errors.hpp"

namespace tandem::kokkos_backend {

using detail::as;

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
  KokkosBackend() {
    if constexpr (kHostMemory) {
      const DeviceProperties p = host::cpu_properties(Exec().concurrency());
      if (p.l2_cache_bytes > 0) scan_part_bytes_ = p.l2_cache_bytes / 2;
      if (p.l3_cache_bytes > 0) stream_from_bytes_ = p.l3_cache_bytes;
    }
  }
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
    if constexpr (kHostMemory) {
      p.tuning.emplace_back("stores", "streaming from " + std::to_string(stream_from_bytes_ >> 20) +
                                          " MiB of output (the last-level cache, sysfs), 16-byte aligned");
      p.tuning.emplace_back("scan", "parts of " + std::to_string(scan_part_bytes_ >> 10) +
                                        " KiB per thread (half the L2, sysfs), the next part's sums read ahead");
    }
    return p;
  }

  // A device space (Kokkos with CUDA or HIP) is not named to other libraries: its wrapping and
  // DLPack exchange have never been run on a GPU.
  MemoryPlace memory_place() const override {
    return kHostMemory ? MemoryPlace{} : MemoryPlace{MemoryPlace::Kind::other, 0};
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
    const auto lock = enter(q);
    Kokkos::fence();
  }

  void binary(Queue q, BinaryOp op, DType t, std::size_t n, const void* x, const void* y, void* out) override {
    const auto lock = enter(q);
    detail::dispatch_float(t, [&]<class T>() {
      kokkos_backend::binary<T>(op, count(n), as<T>(x), as<T>(y), as<T>(out), stream_output(out, n * sizeof(T), x, y));
    });
  }
  void unary(Queue q, UnaryOp op, DType t, std::size_t n, const void* x, void* out) override {
    const auto lock = enter(q);
    detail::dispatch_float(t, [&]<class T>() {
      kokkos_backend::unary<T>(op, count(n), as<T>(x), as<T>(out), stream_output(out, n * sizeof(T), x));
    });
  }
  void axpy(Queue q, DType t, std::size_t n, double alpha, const void* x, void* y) override {
    const auto lock = enter(q);
    detail::dispatch_float(t, [&]<class T>() { kokkos_backend::axpy<T>(count(n), T(alpha), as<T>(x), as<T>(y)); });
  }
  void scale(Queue q, DType t, std::size_t n, double alpha, const void* x, void* out) override {
    const auto lock = enter(q);
    detail::dispatch_float(t, [&]<class T>() {
      kokkos_backend::scale<T>(count(n), T(alpha), as<T>(x), as<T>(out), stream_output(out, n * sizeof(T), x));
    });
  }
  void fill(Queue q, DType t, std::size_t n, double value, void* out) override {
    const auto lock = enter(q);
    detail::dispatch_any(t, [&]<class T>() {
      kokkos_backend::fill<T>(count(n), host::from<T>(value), as<T>(out), stream_output(out, n * sizeof(T)));
    });
  }
  void add_row_vector(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                      const void* bias, void* out, std::int64_t ldo) override {
    const auto lock = enter(q);
    detail::dispatch_float(t, [&]<class T>() {
      kokkos_backend::add_row_vector<T>(rows, cols, as<T>(x), ldx, as<T>(bias), as<T>(out), ldo);
    });
  }
  void matrix_add(Queue q, DType t, std::int64_t rows, std::int64_t cols, double alpha, const void* a, std::int64_t lda,
                  double beta, const void* b, std::int64_t ldb, void* c, std::int64_t ldc) override {
    const auto lock = enter(q);
    detail::dispatch_float(t, [&]<class T>() {
      kokkos_backend::matrix_add<T>(rows, cols, T(alpha), as<T>(a), lda, T(beta), as<T>(b), ldb, as<T>(c), ldc);
    });
  }
  void transpose(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* a, std::int64_t lda, void* out,
                 std::int64_t ldo) override {
    const auto lock = enter(q);
    detail::dispatch_any(t,
                         [&]<class T>() { kokkos_backend::transpose<T>(rows, cols, as<T>(a), lda, as<T>(out), ldo); });
  }
  void gather_rows(Queue q, DType t, std::int64_t rows, std::int64_t cols, const std::int32_t* index,
                   std::int64_t x_rows, const void* x, std::int64_t ldx, void* out, std::int64_t ldo) override {
    const auto lock = enter(q);
    detail::dispatch_any(t, [&]<class T>() {
      const T missing = host::from<T>(std::is_same_v<T, std::int32_t> ? -1.0 : std::nan(""));
      kokkos_backend::gather_rows<T>(rows, cols, index, x_rows, as<T>(x), ldx, as<T>(out), ldo, missing);
    });
  }
  void convert(Queue q, DType from, DType to_type, std::size_t n, const void* x, void* out) override {
    const auto lock = enter(q);
    detail::dispatch_real(from, [&]<class S>() {
      detail::dispatch_real(to_type, [&]<class D>() { kokkos_backend::convert<S, D>(count(n), as<S>(x), as<D>(out)); });
    });
  }

  // register_blocked packs into level-1 team scratch and runs one team per core: host spaces only.
  std::vector<MatmulTier> matmul_tiers(DType) const override {
    if constexpr (kHostMemory) return {MatmulTier::naive, MatmulTier::tiled, MatmulTier::register_blocked};
    return {MatmulTier::naive, MatmulTier::tiled};
  }
  MatmulTier choose_matmul_tier(const GemmArgs& g) const override {
    if (g.m * g.n < 64 * 64 || g.k < 16) return MatmulTier::naive;
    return kHostMemory ? MatmulTier::register_blocked : MatmulTier::tiled;
  }
  void matmul(Queue q, const GemmArgs& g) override {
    const auto lock = enter(q);
    const std::vector<MatmulTier> tiers = matmul_tiers(g.ab_type);
    if (std::find(tiers.begin(), tiers.end(), g.tier) == tiers.end()) {
      std::string names;
      for (MatmulTier t : tiers) names += std::string(names.empty() ? "" : ", ") + std::string(name_of(t));
      throw Unsupported("matmul: the kokkos backend has the tiers " + names + " here, not '" +
                        std::string(name_of(g.tier)) + "'");
    }
    detail::dispatch_real(g.ab_type, [&]<class TA>() {
      detail::dispatch_float(g.c_type, [&]<class TC>() {
        using C = std::conditional_t<std::is_same_v<TA, double>, double, float>;
        if (g.tier == MatmulTier::naive) {
          matmul_naive<C, TA, TC>(g);
        } else if (g.tier == MatmulTier::tiled) {
          matmul_tiled<C, TA, TC>(g);
        } else if constexpr (kHostMemory) {
          matmul_register_blocked<C, TA, TC>(g);
        }
      });
    });
  }

  void reduce(Queue q, ReduceOp op, DType t, std::size_t n_elems, const void* x, void* result,
              ReduceVariant) override {
    const auto lock = enter(q);
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
    const auto lock = enter(q);
    detail::dispatch_float(t, [&]<class T>() {
      store(result, sum_of<T>("tandem::dot", count(n), Products<T>{as<T>(x), as<T>(y)}));
    });
  }
  void mse(Queue q, DType t, std::size_t n, const void* a, const void* b, void* result) override {
    const auto lock = enter(q);
    detail::dispatch_float(t, [&]<class T>() {
      store(result, sum_of<T>("tandem::mse", count(n), SquaredDifferences<T>{as<T>(a), as<T>(b)}) / T(n));
    });
  }
  void reduce_rows(Queue q, ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                   void* out) override {
    const auto lock = enter(q);
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
    const auto lock = enter(q);
    // A column of x is a row of x^T: the same loop with the strides swapped.
    detail::dispatch_numeric(t, [&]<class T>() {
      if (op == ReduceOp::max) {
        reduce_axis<T, true>(cols, rows, as<T>(x), 1, ldx, as<T>(out));
      } else {
        reduce_axis<T, false>(cols, rows, as<T>(x), 1, ldx, as<T>(out));
      }
    });
  }
  void scan(Queue q, ScanKind kind, DType t, std::size_t n, const void* x, void* out, ScanVariant) override {
    const auto lock = enter(q);
    detail::dispatch_numeric(t, [&]<class T>() {
      kokkos_backend::scan<T>(kind == ScanKind::inclusive, count(n), as<T>(x), as<T>(out),
                              scan_plan(sizeof(T), stream_output(out, n * sizeof(T), x)));
    });
  }
  void softmax_cross_entropy(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* logits,
                             std::int64_t ld_logits, const std::int32_t* labels, void* probs, std::int64_t ld_probs,
                             void* losses) override {
    const auto lock = enter(q);
    detail::dispatch_float(t, [&]<class T>() {
      kokkos_backend::softmax_cross_entropy<T>(rows, cols, as<T>(logits), ld_logits, labels, as<T>(probs), ld_probs,
                                               as<T>(losses));
    });
  }

 private:
  static std::int64_t count(std::size_t n) { return static_cast<std::int64_t>(n); }
  // The host kernels: half the L2 per thread for a scan's part (the next part's chunks are read
  // ahead beside it), streaming stores for outputs past the last-level cache; sizes from sysfs.
  std::size_t scan_part_bytes_ = std::size_t(256) << 10;
  std::size_t stream_from_bytes_ = std::size_t(32) << 20;
  std::vector<double> scan_sums_;  // the chunk sums (see ScanPlan), double-sized slots
  // The host scan's plan for elements of `elem` bytes (see ScanPlan).
  ScanPlan scan_plan(std::size_t elem, bool stream) {
    const std::int64_t threads = Exec().concurrency();
    const std::int64_t part =
        std::max<std::int64_t>(1, std::int64_t(scan_part_bytes_) * threads / std::int64_t(elem) / kChunk) * kChunk;
    scan_sums_.resize(std::size_t(2 * part / kChunk));
    return ScanPlan{part, stream, scan_sums_.data()};
  }
  // Whether an output of `bytes` at `out` is written with streaming stores (see stream_line): on a
  // host space, past the last-level cache, 16-byte aligned, and not one of the inputs (their lines
  // are in the cache anyway).
  bool stream_output(const void* out, std::size_t bytes, const void* in = nullptr, const void* in2 = nullptr) const {
    return kHostMemory && bytes >= stream_from_bytes_ && can_stream(out) && out != in && out != in2;
  }
  // Kokkos runs one queue here: the default one (id 0). Every dispatch holds one lock for the
  // process: the default execution-space instance is shared by all host threads, and its team
  // scratch and reduction buffers with it (Serial, OpenMP), so two threads dispatching at once
  // corrupted each other's tiled matmuls (20 of 800 concurrent results wrong before this lock).
  // Recursive: a reduction stores its result through copy(), which takes it again.
  [[nodiscard]] static std::unique_lock<std::recursive_mutex> enter(Queue q) {
    if (q.id != 0) {
      throw InvalidArgument("queue " + std::to_string(q.id) +
                            " was not created by the kokkos backend (it has one queue)");
    }
    static std::recursive_mutex dispatch;
    return std::unique_lock(dispatch);
  }
  // A scalar result, written to device memory from the host. A reduction into a host scalar has
  // finished when parallel_reduce returns, so host memory takes it without deep_copy's fences.
  template <class T>
  void store(void* result, T value) {
    if constexpr (kHostMemory) {
      std::memcpy(result, &value, sizeof(T));
    } else {
      copy(Queue{}, result, &value, sizeof(T), false, true);
    }
  }
  // bytes between any two of host and device memory, through unmanaged Views.
  static void copy(Queue q, void* dst, const void* src, std::size_t bytes, bool dst_host, bool src_host) {
    const auto lock = enter(q);
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
