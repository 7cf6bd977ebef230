// The GPU Backend, written once against a small runtime layer and instantiated three times:
// CUDA (backends/cuda), HIP (backends/hip) and the simulator (backends/sim). It owns memory,
// copies, queues and events through the runtime and turns every primitive into launches of the
// kernels in kernels/. Nothing per algorithm is written per runtime.
//
// A Runtime provides:
//   void* allocate(size_t) (nullptr when the device is full); void release(void*);
//   void set_requested(void*, size_t) (guard what the caching allocator does not use);
//   void* host_allocate(size_t, bool& pinned) (nullptr when it cannot); void host_release(void*) noexcept;
//   bool has_managed() const; void* managed_allocate(size_t) (nullptr when it cannot);
//   void managed_release(void*) noexcept;
//   size_t free_bytes() const; DeviceProperties properties() const;
//   unsigned max_blocks() const (blocks worth launching for a grid-stride loop);
//   int create_stream(); int streams() const (the default one included); void check_stream(int) const;
//   void synchronize(int);
//   void copy(int stream, void* dst, const void* src, size_t bytes) (asynchronous, any direction);
//   void memset(int stream, void* p, int value, size_t bytes);
//   std::shared_ptr<Event::Impl> record(int stream); double elapsed_ms(Event::Impl*, Event::Impl*);
//   void wait_event(int stream, Event::Impl*) (the stream waits); void synchronize_event(Event::Impl*) (the host);
//   template <class... P, class... A> void launch(int stream, const gpu::LaunchConfig&, void (*)(P...), A&&...).
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <utility>

#include "../../core/dispatch.hpp"
#include "kernels/elementwise.hpp"
#include "kernels/matmul.hpp"
#include "kernels/matmul_tensor_core.hpp"
#if !defined(TANDEM_HIP)
#include "kernels/matmul_wgmma.hpp"  // NVIDIA Hopper's (and the simulator's model of it)
#if defined(TANDEM_GPU_COMPILER)
#include "../cuda/tensor_map.hpp"
#endif
#endif
#include "kernels/ml.hpp"
#include "kernels/probe.hpp"
#include "kernels/reduce.hpp"
#include "kernels/scan.hpp"
#include "kernels/scan_lookback.hpp"
#include "tandem/backend.hpp"
#include "tandem/environment.hpp"
#include "tandem/errors.hpp"
#include "tandem/provenance.hpp"

namespace tandem::gpu {

#if !defined(TANDEM_HIP)
// Tensor maps for TMA copies, on this compilation's runtime: the CUDA driver's encoder, or the
// simulator's model of it (the same arguments).
#if defined(TANDEM_GPU_COMPILER)
using ::tandem::cuda::make_tensor_map_2d;
#else
using ::tandem::sim::make_tensor_map_2d;
#endif
#endif

using detail::as;

inline const std::vector<ReduceVariant>& reduce_variants() {
  static const std::vector<ReduceVariant> v = {ReduceVariant::single_pass, ReduceVariant::warp_shuffle,
                                               ReduceVariant::shared_tree};
  return v;
}
// A scan with no variant named takes three passes from this many elements, and at every size
// while the look-back is not verified on hardware (gpu_reductions.hpp).
inline constexpr std::size_t kScanThreePassFrom = std::size_t(1)
                                                  << 20;  // H200, 1M f32: look-back 378, three passes 441 GB/s
inline const std::vector<ScanVariant>& scan_variants() {
  static const std::vector<ScanVariant> v = {ScanVariant::decoupled_lookback, ScanVariant::three_pass,
                                             ScanVariant::single_block};
  return v;
}

template <class Runtime>
class GpuBackend : public Backend {
 public:
  template <class... A>
  explicit GpuBackend(std::string name, A&&... runtime_args)
      : name_(std::move(name)), rt_(std::forward<A>(runtime_args)...), warp_width_(rt_.properties().simd_width) {}

  Runtime& runtime() { return rt_; }

  std::string name() const override { return name_; }
  // The runtime's, and which kernel the tensor_core tier runs (tandem info shows it).
  DeviceProperties properties() const override {
    DeviceProperties p = rt_.properties();
    if (has_tensor_core(DType::bf16)) {
      const unsigned width = wgmma_requested();
      p.tuning.push_back({"tensor_core kernel", width == 0 ? "mma.sync (TANDEM_GPU_TENSOR_KERNEL=wgmma or wgmma_128: "
                                                             "Hopper's TMA and wgmma kernel, opt-in)"
                                                           : std::string("wgmma, 128 x ") + std::to_string(width) +
                                                                 " tiles (TANDEM_GPU_TENSOR_KERNEL)"});
    }
    return p;
  }
  MemoryPlace memory_place() const override { return rt_.memory_place(); }

  // ---- resource contract ----
  void* device_allocate(std::size_t bytes) override { return rt_.allocate(bytes); }
  void device_free(void* ptr, std::size_t) override { rt_.release(ptr); }
  std::size_t device_free_bytes() const override { return rt_.free_bytes(); }
  // Host memory may be pageable and reused as soon as these return: they wait for the copy.
  void copy_to_device(Queue q, void* d_dst, const void* h_src, std::size_t bytes) override {
    if (bytes == 0) return;
    rt_.copy(stream(q), d_dst, h_src, bytes);
    rt_.synchronize(q.id);
  }
  void copy_to_host(Queue q, void* h_dst, const void* d_src, std::size_t bytes) override {
    if (bytes == 0) return;
    rt_.copy(stream(q), h_dst, d_src, bytes);
    rt_.synchronize(q.id);
  }
  void copy_on_device(Queue q, void* d_dst, const void* d_src, std::size_t bytes) override {
    if (bytes == 0) return;
    rt_.copy(stream(q), d_dst, d_src, bytes);
  }
  // The caller keeps the host memory unchanged until the queue has passed the copy.
  void copy_to_device_async(Queue q, void* d_dst, const void* h_src, std::size_t bytes) override {
    if (bytes == 0) return;
    rt_.copy(stream(q), d_dst, h_src, bytes);
  }
  void copy_to_host_async(Queue q, void* h_dst, const void* d_src, std::size_t bytes) override {
    if (bytes == 0) return;
    rt_.copy(stream(q), h_dst, d_src, bytes);
  }
  void* host_allocate(std::size_t bytes, bool& pinned) override {
    void* p = bytes == 0 ? nullptr : rt_.host_allocate(bytes, pinned);
    if (p == nullptr && bytes != 0) throw OutOfMemory(bytes, 0, name_ + " (page-locked host memory)");
    return p;
  }
  void host_free(void* ptr, std::size_t, bool) override {
    if (ptr != nullptr) rt_.host_release(ptr);
  }

  void read_probe(Queue q, const void* data, std::size_t bytes, unsigned passes, unsigned shared_per_block,
                  void* sink) override {
    const std::size_t n = bytes / sizeof(float);
    if (n == 0) throw InvalidArgument("read_probe: the working set holds no f32 element");
    const Dim3 grid{probe_blocks(), 1, 1};
    if (shared_per_block == 0) {
      launch(q, "read_probe", grid, block_1d(), 0, kernels::read_probe_kernel, as<float>(data), n, passes,
             static_cast<float*>(sink));
    } else {
      const std::size_t shared = std::size_t(shared_per_block) * sizeof(float);
      const std::size_t limit = properties().shared_memory_per_block;
      if (limit != 0 && shared > limit) {
        throw InvalidArgument("read_probe: " + std::to_string(shared) +
                              " bytes of shared memory per block; the device " + "has " + std::to_string(limit));
      }
      launch(q, "shared_probe", grid, block_1d(), shared, kernels::shared_probe_kernel, as<float>(data), n,
             shared_per_block, passes, static_cast<float*>(sink));
    }
  }
  unsigned probe_blocks() const override { return rt_.max_blocks(); }

  bool has_managed_memory() const override { return rt_.has_managed(); }
  void* managed_allocate(std::size_t bytes) override {
    if (!rt_.has_managed()) return Backend::managed_allocate(bytes);  // throws Unsupported
    return rt_.managed_allocate(bytes == 0 ? 1 : bytes);
  }
  void managed_free(void* ptr, std::size_t) noexcept override {
    if (ptr != nullptr) rt_.managed_release(ptr);
  }

  Queue create_queue() override { return Queue{rt_.create_stream()}; }

  // A runtime with graphs (CUDA) captures for real; the others (HIP 5.2 here, the simulator)
  // record the work (Backend::capture). In gpu_graphs.hpp.
  Graph capture(Queue q, const std::function<void()>& work) override;
  void synchronize(Queue q) override { rt_.synchronize(stream(q)); }
  Event record_event(Queue q) override { return Event(rt_.record(stream(q))); }
  double elapsed_ms(const Event& start, const Event& stop) override {
    if (start.impl() == nullptr || stop.impl() == nullptr) {
      throw InvalidArgument("elapsed_ms: an event was not recorded (use record_event)");
    }
    return rt_.elapsed_ms(start.impl(), stop.impl());
  }
  void wait_event(Queue q, const Event& e) override {
    if (e.impl() == nullptr) throw InvalidArgument("wait_event: the event was not recorded (use record_event)");
    rt_.wait_event(stream(q), e.impl());
  }
  void synchronize_event(const Event& e) override {
    if (e.impl() == nullptr) throw InvalidArgument("synchronize_event: the event was not recorded (use record_event)");
    rt_.synchronize_event(e.impl());
  }

  std::vector<ReduceVariant> reduce_variants() const override { return gpu::reduce_variants(); }
  std::vector<ScanVariant> scan_variants() const override { return gpu::scan_variants(); }

  // ---- elementwise ----
  void binary(Queue q, BinaryOp op, DType t, std::size_t n, const void* x, const void* y, void* out) override {
    detail::dispatch_float(t, [&]<class T>() {
      const bool packed = aligned(x, y, out);
      launch(q, "binary", grid_1d(packed ? n / kernels::Pack<T>::size : n), block_1d(), 0, kernels::binary_kernel<T>,
             op, n, as<T>(x), as<T>(y), as<T>(out), packed);
    });
  }
  void unary(Queue q, UnaryOp op, DType t, std::size_t n, const void* x, void* out) override {
    detail::dispatch_float(t, [&]<class T>() {
      const bool packed = aligned(x, out);
      launch(q, "unary", grid_1d(packed ? n / kernels::Pack<T>::size : n), block_1d(), 0, kernels::unary_kernel<T>, op,
             n, as<T>(x), as<T>(out), packed);
    });
  }
  void axpy(Queue q, DType t, std::size_t n, double alpha, const void* x, void* y) override {
    detail::dispatch_float(t, [&]<class T>() {
      const bool packed = aligned(x, y);
      launch(q, "axpy", grid_1d(packed ? n / kernels::Pack<T>::size : n), block_1d(), 0, kernels::axpy_kernel<T>, n,
             T(alpha), as<T>(x), as<T>(y), packed);
    });
  }
  void scale(Queue q, DType t, std::size_t n, double alpha, const void* x, void* out) override {
    detail::dispatch_float(t, [&]<class T>() {
      const bool packed = aligned(x, out);
      launch(q, "scale", grid_1d(packed ? n / kernels::Pack<T>::size : n), block_1d(), 0, kernels::scale_kernel<T>, n,
             T(alpha), as<T>(x), as<T>(out), packed);
    });
  }
  void fill(Queue q, DType t, std::size_t n, double value, void* out) override {
    detail::dispatch_any(t, [&]<class T>() {
      T v;
      if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
        v = T(static_cast<float>(value));
      } else {
        v = static_cast<T>(value);
      }
      using U = std::conditional_t<sizeof(T) == 2, std::uint16_t,
                                   std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>;
      U bits;
      std::memcpy(&bits, &v, sizeof bits);
      const bool packed = aligned(out);
      launch(q, "fill", grid_1d(packed ? n / kernels::Pack<U>::size : n), block_1d(), 0, kernels::fill_kernel<U>, n,
             bits, static_cast<U*>(out), packed);
    });
  }

  // ---- matrix ----
  void add_row_vector(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                      const void* bias, void* out, std::int64_t ldo) override {
    detail::dispatch_float(t, [&]<class T>() {
      launch(q, "add_row_vector", grid_2d(rows, cols, kernels::kRows2d, kernels::kCols2d),
             Dim3{kernels::kCols2d, kernels::kRows2d, 1}, 0, kernels::add_row_vector_kernel<T>, rows, cols, as<T>(x),
             ldx, as<T>(bias), as<T>(out), ldo);
    });
  }
  void bias_activation(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                       const void* bias, UnaryOp act, void* z, std::int64_t ldz, void* out, std::int64_t ldo) override {
    detail::dispatch_float(t, [&]<class T>() {
      launch(q, "bias_activation", grid_2d(rows, cols, kernels::kRows2d, kernels::kCols2d),
             Dim3{kernels::kCols2d, kernels::kRows2d, 1}, 0, kernels::bias_activation_kernel<T>, rows, cols, as<T>(x),
             ldx, as<T>(bias), act, static_cast<T*>(z), ldz, as<T>(out), ldo);
    });
  }
  void matrix_add(Queue q, DType t, std::int64_t rows, std::int64_t cols, double alpha, const void* a, std::int64_t lda,
                  double beta, const void* b, std::int64_t ldb, void* c, std::int64_t ldc) override {
    detail::dispatch_float(t, [&]<class T>() {
      if (rows == 1 || (lda == cols && ldb == cols && ldc == cols)) {  // no gaps: one flat pass
        const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
        const bool packed = aligned(a, b, c);
        return launch(q, "matrix_add", grid_1d(packed ? n / kernels::Pack<T>::size : n), block_1d(), 0,
                      kernels::scaled_add_kernel<T>, n, T(alpha), as<T>(a), T(beta), as<T>(b), as<T>(c), packed);
      }
      launch(q, "matrix_add", grid_2d(rows, cols, kernels::kRows2d, kernels::kCols2d),
             Dim3{kernels::kCols2d, kernels::kRows2d, 1}, 0, kernels::matrix_add_kernel<T>, rows, cols, T(alpha),
             as<T>(a), lda, T(beta), as<T>(b), ldb, as<T>(c), ldc);
    });
  }
  void transpose(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* a, std::int64_t lda, void* out,
                 std::int64_t ldo) override {
    auto run = [&]<class U>() {
      constexpr unsigned T = kernels::kTransposeTile;
      launch(q, "transpose", grid_2d(rows, cols, T, T), Dim3{T, kernels::kTransposeRows, 1}, 0,
             kernels::transpose_kernel<U>, rows, cols, static_cast<const U*>(a), lda, static_cast<U*>(out), ldo);
    };
    switch (size_of(t)) {
      case 2:
        return run.template operator()<std::uint16_t>();
      case 4:
        return run.template operator()<std::uint32_t>();
      default:
        return run.template operator()<std::uint64_t>();
    }
  }

  void gather_rows(Queue q, DType t, std::int64_t rows, std::int64_t cols, const std::int32_t* index,
                   std::int64_t x_rows, const void* x, std::int64_t ldx, void* out, std::int64_t ldo) override {
    auto run = [&]<class U>(U missing) {
      launch(q, "gather_rows", grid_2d(rows, cols, kernels::kRows2d, kernels::kCols2d),
             Dim3{kernels::kCols2d, kernels::kRows2d, 1}, 0, kernels::gather_rows_kernel<U>, rows, cols, index, x_rows,
             static_cast<const U*>(x), ldx, static_cast<U*>(out), ldo, missing);
    };
    switch (t) {
      case DType::f16:
        return run(std::uint16_t{0x7e00});  // quiet NaN
      case DType::bf16:
        return run(std::uint16_t{0x7fc0});
      case DType::f32:
        return run(std::bit_cast<std::uint32_t>(std::numeric_limits<float>::quiet_NaN()));
      case DType::i32:
        return run(std::bit_cast<std::uint32_t>(std::int32_t{-1}));
      case DType::f64:
        return run(std::bit_cast<std::uint64_t>(std::numeric_limits<double>::quiet_NaN()));
    }
  }
  void adam_step(Queue q, DType t, std::size_t n, const AdamParams& p, void* w, const void* g, void* m,
                 void* v) override {
    const double c1 = 1 - std::pow(p.beta1, double(p.t)), c2 = 1 - std::pow(p.beta2, double(p.t));
    detail::dispatch_float(t, [&]<class T>() {
      launch(q, "adam_step", grid_1d(n), block_1d(), 0, kernels::adam_step_kernel<T>, n, T(p.beta1), T(p.beta2),
             T(p.learning_rate / c1), T(1 / c2), T(p.epsilon), T(1 - p.learning_rate * p.weight_decay), as<T>(w),
             as<T>(g), as<T>(m), as<T>(v));
    });
  }
  void convert(Queue q, DType from, DType to, std::size_t n, const void* x, void* out) override {
    detail::dispatch_real(from, [&]<class S>() {
      detail::dispatch_real(to, [&]<class D>() {
        launch(q, "convert", grid_1d(n), block_1d(), 0, kernels::convert_kernel<S, D>, n, as<S>(x), as<D>(out));
      });
    });
  }

  // tensor_core: f16 and bf16 inputs, on 32-lane warps (the mma.sync fragments are laid out over 32).
  std::vector<MatmulTier> matmul_tiers(DType t) const override {
    std::vector<MatmulTier> tiers = {MatmulTier::naive, MatmulTier::tiled, MatmulTier::register_blocked};
    if (has_tensor_core(t)) tiers.push_back(MatmulTier::tensor_core);
    return tiers;
  }
  bool has_tensor_core(DType t) const {
    return (t == DType::f16 || t == DType::bf16) && warp_width_ == int(kernels::kMmaLanes);
  }
  MatmulTier choose_matmul_tier(const GemmArgs&) const override { return MatmulTier::register_blocked; }
  // The register_blocked tier's 128 x 128 tiles (f32 inputs) where there are at least a quarter
  // of max_blocks of them (two per multiprocessor on CUDA and HIP), else 64 x 64 (more, smaller
  // blocks); TANDEM_GPU_GEMM_TILE picks one. Read at each call, so a benchmark can compare both.
  bool large_gemm_tile(std::int64_t m, std::int64_t n) const {
    static const std::vector<std::string> choices = {"auto", "64", "128"};  // no allocation per call
    const std::string tile = env::choice("TANDEM_GPU_GEMM_TILE", choices, "auto");
    if (tile != "auto") return tile == "128";
    const std::int64_t large = kernels::RegisterLarge::block_m;
    const std::int64_t tiles = ((m + large - 1) / large) * ((n + large - 1) / large);
    return tiles >= std::int64_t(rt_.max_blocks() / 4);
  }

  // TANDEM_GPU_TENSOR_KERNEL=wgmma (128 x 256 tiles) or wgmma_128 (128 x 128): the tensor_core tier
  // runs the Hopper kernel (kernels/matmul_wgmma.hpp), opt-in until a GPU run has measured it; else
  // (0) the portable mma.sync one. Read at each call, so a benchmark can compare them.
  static unsigned wgmma_requested() {
    static const std::vector<std::string> choices = {"mma_sync", "wgmma", "wgmma_128"};  // no allocation per call
    const std::string kernel = env::choice("TANDEM_GPU_TENSOR_KERNEL", choices, "mma_sync");
    return kernel == "wgmma" ? 256 : kernel == "wgmma_128" ? 128 : 0;
  }
  // The Hopper kernel, where this backend, device and product allow it; Unsupported saying why not.
  template <class TA>
  void matmul_wgmma(Queue q, const GemmArgs& a, const kernels::Gemm<TA, float>& g, unsigned width) {
    const std::string refused = std::string("matmul: the wgmma kernel (TANDEM_GPU_TENSOR_KERNEL=") +
                                (width == 256 ? "wgmma" : "wgmma_128") + ") ";
#if defined(TANDEM_HIP)
    (void)q, (void)a, (void)g;
    throw Unsupported(refused + "is NVIDIA Hopper's; hip has no wgmma (unset the variable)");
#elif defined(TANDEM_GPU_COMPILER) && !defined(TANDEM_CUDA_SM90A)
    (void)q, (void)a, (void)g;
    throw Unsupported(refused +
                      "needs sm_90a code, which this build lacks (configure with CMAKE_CUDA_ARCHITECTURES=90a)");
#else
    if constexpr (!std::is_same_v<TA, bfloat16> && !std::is_same_v<TA, half>) {
      (void)q, (void)g;
      throw Unsupported(refused + "takes bf16 or f16 inputs, not " + std::string(name_of(a.ab_type)));
    } else {
      if (a.lda % 8 != 0 || a.ldb % 8 != 0 || !aligned(a.a, a.b)) {
        throw Unsupported(refused +
                          "takes A and B from 16-byte aligned starts with rows a multiple of 16 bytes apart (the "
                          "layouts its TMA copies need); unset the variable for the mma.sync kernel, which takes any");
      }
#if defined(TANDEM_GPU_COMPILER)
      if (const std::string cc = rt_.properties().compute_capability; cc != "9.0") {
        throw Unsupported(refused + "runs on compute capability 9.0 (H100, H200); this device is " + cc);
      }
#endif
      // K-major operands (A as it is, B transposed) come in one box a stage, M/N-major ones (A
      // transposed, B as it is) in boxes of 64 k rows by 64 elements (kernels/matmul_wgmma.hpp).
      const bool a_mn = a.trans_a == Transpose::yes, b_mn = a.trans_b == Transpose::no;
      const auto run = [&]<unsigned BlockN, bool AMn, bool BMn>() {
        using T = kernels::WgmmaTile<BlockN>;
        const auto a_map =
            AMn ? make_tensor_map_2d(a.a, 2, a.m, a.k, a.lda * 2, 64, T::block_k, Swizzle::bytes128)
                : make_tensor_map_2d(a.a, 2, a.k, a.m, a.lda * 2, T::block_k, T::block_m, Swizzle::bytes128);
        const auto b_map =
            BMn ? make_tensor_map_2d(a.b, 2, a.n, a.k, a.ldb * 2, 64, T::block_k, Swizzle::bytes128)
                : make_tensor_map_2d(a.b, 2, a.k, a.n, a.ldb * 2, T::block_k, T::block_n, Swizzle::bytes128);
        // Persistent: a block per multiprocessor (its shared memory admits one), each walking
        // tiles in the kernel's grouped order.
        const std::int64_t tiles = ((a.m + T::block_m - 1) / T::block_m) * ((a.n + T::block_n - 1) / T::block_n);
        const auto blocks = static_cast<unsigned>(
            std::clamp<std::int64_t>(tiles, 1, std::max(1, rt_.properties().compute_units)));
        const LaunchConfig config{"matmul_wgmma", Dim3{blocks, 1, 1}, Dim3{T::threads, 1, 1}, T::shared_bytes, true};
        rt_.launch(stream(q), config, kernels::matmul_wgmma_kernel<TA, BlockN, AMn, BMn>, a_map, b_map, g);
      };
      const auto layouts = [&]<unsigned BlockN>() {
        if (a_mn) {
          b_mn ? run.template operator()<BlockN, true, true>() : run.template operator()<BlockN, true, false>();
        } else {
          b_mn ? run.template operator()<BlockN, false, true>() : run.template operator()<BlockN, false, false>();
        }
      };
      if (width == 256) {
        layouts.template operator()<256>();
      } else {
        layouts.template operator()<128>();
      }
    }
#endif
  }

  void matmul(Queue q, const GemmArgs& a) override {
    detail::dispatch_any(a.ab_type, [&]<class TA>() {
      if constexpr (std::is_same_v<TA, std::int32_t>) {
        throw DTypeMismatch("matmul: i32 inputs are not offered; use f32, f64, f16 or bf16");
      } else {
        using TC = std::conditional_t<std::is_same_v<TA, double>, double, float>;
        kernels::Gemm<TA, TC> g{a.m,
                                a.n,
                                a.k,
                                TC(a.alpha),
                                TC(a.beta),
                                static_cast<const TA*>(a.a),
                                a.lda,
                                a.trans_a == Transpose::yes,
                                static_cast<const TA*>(a.b),
                                a.ldb,
                                a.trans_b == Transpose::yes,
                                static_cast<TC*>(a.c),
                                a.ldc,
                                false,
                                false};
        constexpr std::int64_t per16 = 16 / sizeof(TA);
        g.vector_a = aligned(a.a) && a.lda % per16 == 0;
        g.vector_b = aligned(a.b) && a.ldb % per16 == 0;
        switch (a.tier) {
          case MatmulTier::naive:
            return launch(q, "matmul_naive", grid_2d(a.m, a.n, 16, 16), Dim3{16, 16, 1}, 0,
                          kernels::matmul_naive_kernel<TA, TC>, g);
          case MatmulTier::tiled:
            return launch(q, "matmul_tiled", grid_2d(a.m, a.n, kernels::kTile, kernels::kTile),
                          Dim3{kernels::kTile, kernels::kTile, 1}, 0, kernels::matmul_tiled_kernel<TA, TC>, g);
          case MatmulTier::register_blocked: {
            const bool large = large_gemm_tile(a.m, a.n);  // checks TANDEM_GPU_GEMM_TILE for every dtype
            if constexpr (std::is_same_v<TA, float>) {
              if (large) {
                using L = kernels::RegisterLarge;
                return launch(q, "matmul_register_blocked", grid_2d(a.m, a.n, L::block_m, L::block_n),
                              Dim3{L::threads, 1, 1}, 0, kernels::matmul_register_kernel<L, TA, TC>, g);
              }
            }
            using S = kernels::RegisterSmall;
            return launch(q, "matmul_register_blocked", grid_2d(a.m, a.n, S::block_m, S::block_n),
                          Dim3{S::threads, 1, 1}, 0, kernels::matmul_register_kernel<S, TA, TC>, g);
          }
          case MatmulTier::tensor_core:
            if constexpr (std::is_same_v<TA, half> || std::is_same_v<TA, bfloat16>) {
              if (has_tensor_core(a.ab_type)) {
                if (const unsigned width = wgmma_requested()) return matmul_wgmma<TA>(q, a, g, width);
                return launch(q, "matmul_tensor_core",
                              grid_2d(a.m, a.n, kernels::kTensorBlockM, kernels::kTensorBlockN),
                              Dim3{kernels::kTensorThreads, 1, 1}, 0, kernels::matmul_tensor_core_kernel<TA>, g);
              }
              throw Unsupported("matmul: the tensor_core tier needs 32-lane warps (NVIDIA); backend '" + name_ +
                                "' has " + std::to_string(warp_width_) + "-lane ones");
            }
            throw Unsupported("matmul: the tensor_core tier takes f16 or bf16 inputs (f32 accumulation), not " +
                              std::string(name_of(a.ab_type)) + "; convert them, or use register_blocked");
          default:
            throw Unsupported("matmul: backend '" + name_ + "' has no tier '" + std::string(name_of(a.tier)) +
                              "'; it has naive, tiled, register_blocked" +
                              (has_tensor_core(a.ab_type) ? ", tensor_core" : ""));
        }
      }
    });
  }

  // ---- reductions (reduce, reduce_rows, reduce_cols, scan, run_reduce: gpu_reductions.hpp) ----
  void reduce(Queue q, ReduceOp op, DType t, std::size_t n, const void* x, void* result,
              ReduceVariant variant) override;
  void dot(Queue q, DType t, std::size_t n, const void* x, const void* y, void* result) override {
    detail::dispatch_float(t, [&]<class T>() {
      run_reduce<kernels::SumOp<T>>(q, ReduceVariant::automatic, kernels::Products<T>{as<T>(x), as<T>(y)}, n,
                                    as<T>(result), kernels::Finish::value);
    });
  }
  void mse(Queue q, DType t, std::size_t n, const void* a, const void* b, void* result) override {
    detail::dispatch_float(t, [&]<class T>() {
      run_reduce<kernels::SumOp<T>>(q, ReduceVariant::automatic, kernels::SquaredDifferences<T>{as<T>(a), as<T>(b)}, n,
                                    as<T>(result), kernels::Finish::mean);
    });
  }
  void reduce_rows(Queue q, ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                   void* out) override;
  void reduce_cols(Queue q, ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                   void* out) override;

  // ---- scans ----
  void scan(Queue q, ScanKind kind, DType t, std::size_t n, const void* x, void* out, ScanVariant variant) override;

  // ---- ML ----
  void softmax_cross_entropy(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* logits,
                             std::int64_t ld_logits, const std::int32_t* labels, void* probs, std::int64_t ld_probs,
                             void* losses) override {
    detail::dispatch_float(t, [&]<class T>() {
      launch(q, "softmax_cross_entropy", Dim3{blocks(static_cast<std::size_t>(rows)), 1, 1}, block_1d(), 0,
             kernels::softmax_cross_entropy_kernel<T>, rows, cols, as<T>(logits), ld_logits, labels, as<T>(probs),
             ld_probs, as<T>(losses));
    });
  }

 protected:
  void on_allocate(void* ptr, std::size_t requested, std::size_t) noexcept override {
    rt_.set_requested(ptr, requested);
  }
  // Called before a capture starts: what must not happen inside one (creating a library handle).
  virtual void before_capture() {}
  bool capturing() const noexcept override { return capture_stream_.load() >= 0; }
  // For a subclass that calls a vendor library on the queue's stream (backends/cuda).
  int queue_stream(Queue q) const { return stream(q); }
  const std::string& backend_name() const { return name_; }

  // Device memory for one op's intermediate results, from the caching allocator. Work queued
  // after this op on the same queue runs after it, so with one queue the block can go back to the
  // cache as soon as the op is queued. The cache does not know queues, though: once the program
  // has created others, the op is waited for first, so another queue cannot get the block while
  // the op still uses it. (A stream-ordered allocator will lift this: the CUDA/HIP issue.)
  struct Scratch {
    GpuBackend& owner;
    Queue queue;
    void* ptr;
    Scratch(GpuBackend& b, Queue q, std::size_t bytes)
        : owner(b), queue(q), ptr(b.allocate(std::max<std::size_t>(bytes, 16))) {}
    ~Scratch() {
      // Used by ops recorded into a graph (on the capturing queue): it lives as long as the graph.
      if (std::vector<void*>* keep = owner.capture_keep_.load(); keep != nullptr && queue.id == owner.capture_stream_) {
        try {
          keep->push_back(ptr);
        } catch (...) {
          // Not kept and not freed: the graph may still use it (a leak, never a use after free).
        }
        return;
      }
      if (owner.rt_.streams() > 1) {
        try {
          owner.rt_.synchronize(queue.id);
        } catch (const Error&) {
          // the queue's error surfaces again at its next use
        }
      }
      owner.deallocate(ptr);
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
  };

 private:
  template <class... P>
  static bool aligned(const P*... p) {
    return ((reinterpret_cast<std::uintptr_t>(p) % 16 == 0) && ...);
  }

  int stream(Queue q) const {
    rt_.check_stream(q.id);
    return q.id;
  }
  static Dim3 block_1d() { return Dim3{kernels::kBlock, 1, 1}; }
  // Blocks for `work` independent items (tiles, rows, ...), at most what fills the device.
  unsigned blocks(std::size_t work) const {
    return static_cast<unsigned>(std::clamp<std::size_t>(work, 1, rt_.max_blocks()));
  }
  Dim3 grid_1d(std::size_t items) const { return Dim3{blocks((items + kernels::kBlock - 1) / kernels::kBlock), 1, 1}; }
  // A 2D grid over (rows, cols) in tiles of (tile_rows, tile_cols), at most max_blocks in all.
  Dim3 grid_2d(std::int64_t rows, std::int64_t cols, std::int64_t tile_rows, std::int64_t tile_cols) const {
    const std::size_t tr = static_cast<std::size_t>((rows + tile_rows - 1) / tile_rows);
    const std::size_t tc = static_cast<std::size_t>((cols + tile_cols - 1) / tile_cols);
    const unsigned gx = blocks(tc);
    const unsigned gy = static_cast<unsigned>(
        std::clamp<std::size_t>(tr, 1, std::min<std::size_t>(65535, std::max<std::size_t>(1, rt_.max_blocks() / gx))));
    return Dim3{gx, gy, 1};
  }

  template <class... P, class... A>
  void launch(Queue q, const char* kernel, Dim3 grid, Dim3 block, std::size_t shared, void (*fn)(P...), A&&... args) {
    rt_.launch(stream(q), LaunchConfig{kernel, grid, block, shared}, fn, std::forward<A>(args)...);
  }

  template <class R, class S, class Out>
  void run_reduce(Queue q, ReduceVariant variant, S src, std::size_t n, Out* result, kernels::Finish finish);

  std::string name_;
  mutable Runtime rt_;
  int warp_width_;                         // the tensor_core tier's fragments are laid out over 32 lanes
  std::atomic<bool> capture_busy_{false};  // one capture at a time per backend; set by the thread capturing
  std::atomic<std::vector<void*>*> capture_keep_{nullptr};  // during a capture: where its scratch memory goes
  std::atomic<int> capture_stream_{-1};                     // and the queue being captured
};

}  // namespace tandem::gpu

// The longer members, by topic.
#include "gpu_graphs.hpp"      // IWYU pragma: keep
#include "gpu_reductions.hpp"  // IWYU pragma: keep
