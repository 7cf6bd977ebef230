// The cuda backend: the GPU Backend of backends/gpu over the CUDA runtime (compiled by nvcc), and
// what only CUDA has: the `vendor` matmul tier through cuBLAS, and CUB as the `cub` variant of
// reduce and scan (the peer of tandem's own variants in the benchmark).
//   vendor: cublasGemmEx on the queue's stream. f32 (exact f32 products, or TF32 tensor cores
//     with MatmulOptions::tf32), f64, and f16 or bf16 inputs with f32 accumulation and f32 C.
//     tandem is row-major and cuBLAS column-major: C^T = op(B)^T op(A)^T is what cuBLAS computes,
//     so the operands go in swapped, with no copy.
//   cub: cub::DeviceReduce (Sum; Reduce with NaN-propagating min/max and a first-index argmax over
//     ArgIndexInputIterator; TransformReduce of squares then a square root for norm2) and
//     cub::DeviceScan (InclusiveSum, ExclusiveSum), with tandem's semantics: i32 sums wrap (summed
//     as u32), NaN propagates, argmax is the first maximum or the first NaN. Up to 2^31 - 1 elements.
#include <cublas_v2.h>

#include <climits>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/iterator/arg_index_input_iterator.cuh>
#include <limits>
#include <mutex>
#include <type_traits>

#include "../../core/factories.hpp"
#include "../gpu/device_runtime.hpp"
#include "../gpu/gpu_backend.hpp"
#include "../gpu/vendor_semantics.hpp"

namespace tandem::detail {

namespace {

using namespace gpu::vendor;

const char* cublas_text(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "not initialised (no usable device or driver)";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "out of device memory";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "not supported by this GPU's architecture";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "the kernel failed to run";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "not supported";
    default:
      return "error";
  }
}

class CudaBackend : public gpu::GpuBackend<gpu::DeviceRuntime> {
 public:
  CudaBackend(std::string name, int device) : GpuBackend(std::move(name), device) {}
  ~CudaBackend() override {
    if (handle_ != nullptr) {
      runtime().make_current();
      (void)cublasDestroy(handle_);
    }
  }

  std::vector<std::string> variants(std::string_view algorithm) const override {
    std::vector<std::string> v = GpuBackend::variants(algorithm);
    if (algorithm == "reduce" || algorithm == "scan") v.emplace_back("cub");
    return v;
  }

  void reduce(Queue q, ReduceOp op, DType t, std::size_t n, const void* x, void* result,
              std::string_view variant) override {
    if (variant != "cub") return GpuBackend::reduce(q, op, t, n, x, result, variant);
    const int count = cub_count(n, "reduce");
    const cudaStream_t s = runtime().native_stream(queue_stream(q));
    runtime().make_current();
    dispatch_numeric(t, [&]<class T>() {
      const T* in = static_cast<const T*>(x);
      // Each CUB call twice: once for the temporary storage it needs, once to run.
      auto run = [&](auto&& call) {
        std::size_t bytes = 0;
        cuda_check(call(nullptr, bytes), "cub (sizing)");
        Scratch tmp(*this, q, bytes);
        cuda_check(call(tmp.ptr, bytes), "cub");
      };
      switch (op) {
        case ReduceOp::sum: {
          using S = SumType<T>;
          const S* sin = reinterpret_cast<const S*>(in);
          S* out = static_cast<S*>(result);
          return run([&](void* p, std::size_t& b) { return cub::DeviceReduce::Sum(p, b, sin, out, count, s); });
        }
        case ReduceOp::max:
          return run([&](void* p, std::size_t& b) {
            return cub::DeviceReduce::Reduce(p, b, in, static_cast<T*>(result), count, NanMax<T>{}, lowest<T>(), s);
          });
        case ReduceOp::min:
          return run([&](void* p, std::size_t& b) {
            return cub::DeviceReduce::Reduce(p, b, in, static_cast<T*>(result), count, NanMin<T>{}, highest<T>(), s);
          });
        case ReduceOp::argmax: {
          using Pair = cub::KeyValuePair<int, T>;
          Scratch best(*this, q, sizeof(Pair));
          Pair* pair = static_cast<Pair*>(best.ptr);
          cub::ArgIndexInputIterator<const T*, int> it(in);
          const T low = lowest<T>();
          run([&](void* p, std::size_t& b) {
            return cub::DeviceReduce::Reduce(p, b, it, pair, count, FirstArgMax<Pair>{}, Pair(INT_MAX, low), s);
          });
          runtime().launch(queue_stream(q), gpu::LaunchConfig{"cub_argmax_key", {1, 1, 1}, {1, 1, 1}, 0},
                           copy_key<Pair>, static_cast<const Pair*>(pair), static_cast<std::int32_t*>(result));
          return;
        }
        case ReduceOp::norm2:
          if constexpr (std::is_same_v<T, std::int32_t>) {
            throw DTypeMismatch("reduce: norm2 of i32 is not offered");
          } else {
            run([&](void* p, std::size_t& b) {
              return cub::DeviceReduce::TransformReduce(p, b, in, static_cast<T*>(result), count, Plus<T>{},
                                                        Square<T>{}, T(0), s);
            });
            runtime().launch(queue_stream(q), gpu::LaunchConfig{"cub_norm2_sqrt", {1, 1, 1}, {1, 1, 1}, 0},
                             sqrt_in_place<T>, static_cast<T*>(result));
            return;
          }
      }
    });
  }

  void scan(Queue q, ScanKind kind, DType t, std::size_t n, const void* x, void* out,
            std::string_view variant) override {
    if (variant != "cub") return GpuBackend::scan(q, kind, t, n, x, out, variant);
    if (n == 0) return;
    const int count = cub_count(n, "scan");
    const cudaStream_t s = runtime().native_stream(queue_stream(q));
    runtime().make_current();
    dispatch_numeric(t, [&]<class T>() {
      using S = SumType<T>;
      const S* in = static_cast<const S*>(x);
      S* o = static_cast<S*>(out);
      std::size_t bytes = 0;
      auto call = [&](void* p, std::size_t& b) {
        return kind == ScanKind::inclusive ? cub::DeviceScan::InclusiveSum(p, b, in, o, count, s)
                                           : cub::DeviceScan::ExclusiveSum(p, b, in, o, count, s);
      };
      cuda_check(call(nullptr, bytes), "cub scan (sizing)");
      Scratch tmp(*this, q, bytes);
      cuda_check(call(tmp.ptr, bytes), "cub scan");
    });
  }

  std::vector<MatmulTier> matmul_tiers(DType t) const override {
    std::vector<MatmulTier> tiers = GpuBackend::matmul_tiers(t);
    if (t != DType::i32) tiers.push_back(MatmulTier::vendor);
    return tiers;
  }

  void matmul(Queue q, const GemmArgs& a) override {
    if (a.tier != MatmulTier::vendor) return GpuBackend::matmul(q, a);
    if (a.ab_type == DType::i32) throw DTypeMismatch("matmul: i32 inputs are not offered; use f32, f64, f16 or bf16");
    std::lock_guard lock(mutex_);  // one handle, bound to the caller's stream for the call
    runtime().make_current();
    if (handle_ == nullptr) check(cublasCreate(&handle_), "creating the cuBLAS handle");
    check(cublasSetStream(handle_, runtime().native_stream(queue_stream(q))), "cublasSetStream");
    const cublasOperation_t ta = a.trans_a == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = a.trans_b == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int m = narrow(a.m, "m"), n = narrow(a.n, "n"), k = narrow(a.k, "k");
    const int lda = narrow(a.lda, "lda"), ldb = narrow(a.ldb, "ldb"), ldc = narrow(a.ldc, "ldc");
    if (m == 0 || n == 0) return;
    if (a.ab_type == DType::f64) {
      const double alpha = a.alpha, beta = a.beta;
      check(cublasGemmEx(handle_, tb, ta, n, m, k, &alpha, a.b, CUDA_R_64F, ldb, a.a, CUDA_R_64F, lda, &beta, a.c,
                         CUDA_R_64F, ldc, CUBLAS_COMPUTE_64F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx (f64)");
      return;
    }
    const float alpha = static_cast<float>(a.alpha), beta = static_cast<float>(a.beta);
    const cudaDataType_t ab = a.ab_type == DType::f32    ? CUDA_R_32F
                              : a.ab_type == DType::bf16 ? CUDA_R_16BF
                                                         : CUDA_R_16F;
    const cublasComputeType_t compute =
        a.ab_type == DType::f32 && a.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    check(cublasGemmEx(handle_, tb, ta, n, m, k, &alpha, a.b, ab, ldb, a.a, ab, lda, &beta, a.c, CUDA_R_32F, ldc,
                       compute, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  }

 private:
  // cublasCreate allocates and synchronizes: never inside a capture.
  void before_capture() override {
    std::lock_guard lock(mutex_);
    runtime().make_current();
    if (handle_ == nullptr) check(cublasCreate(&handle_), "creating the cuBLAS handle");
  }
  static int cub_count(std::size_t n, const char* what) {
    if (n > std::size_t(INT_MAX)) {
      throw Unsupported(std::string(what) + ": the cub variant takes up to 2^31 - 1 elements, not " +
                        std::to_string(n) + "; use tandem's own variants");
    }
    return static_cast<int>(n);
  }
  void cuda_check(cudaError_t e, const char* what) const {
    if (e == cudaSuccess) return;
    (void)cudaGetLastError();
    throw DeviceError(std::string(what) + " on " + backend_name() + ": " + cudaGetErrorName(e) + " (" +
                      cudaGetErrorString(e) + ")");
  }
  void check(cublasStatus_t s, const char* what) const {
    if (s == CUBLAS_STATUS_SUCCESS) return;
    if (s == CUBLAS_STATUS_ALLOC_FAILED) {
      throw DeviceError("cuBLAS " + std::string(what) + " on " + backend_name() +
                        ": no device memory for its workspace (" + std::to_string(device_free_bytes()) +
                        " bytes free); free buffers or call empty_cache()");
    }
    throw DeviceError("cuBLAS " + std::string(what) + " on " + backend_name() + ": " + cublas_text(s) + " (status " +
                      std::to_string(static_cast<int>(s)) + ")");
  }
  // cuBLAS takes int sizes.
  static int narrow(std::int64_t v, const char* what) {
    if (v > std::int64_t(2147483647)) {
      throw InvalidArgument(std::string("matmul (vendor): ") + what + " = " + std::to_string(v) +
                            " is beyond cuBLAS's 32-bit sizes; use the register_blocked tier");
    }
    return static_cast<int>(v);
  }

  std::mutex mutex_;
  cublasHandle_t handle_ = nullptr;
};

}  // namespace

int cuda_device_count(std::string& reason) { return gpu::device_count(reason); }

std::shared_ptr<Backend> make_cuda_backend(int device) {
  return make_backend<CudaBackend>(device == 0 ? "cuda" : "cuda:" + std::to_string(device), device);
}

}  // namespace tandem::detail
