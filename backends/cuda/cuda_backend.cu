// The cuda backend: the GPU Backend of backends/gpu over the CUDA runtime (compiled by nvcc), and
// what only CUDA has: the `vendor` matmul tier through cuBLAS, CUB as the `cub` variant of
// reduce and scan (the peer of tandem's own variants in the benchmark), and NCCL as its device
// collective (nccl_collective.hpp) when the toolkit has it.
//   vendor: cublasGemmEx on the queue's stream. f32 (exact f32 products, or TF32 tensor cores
//     with MatmulOptions::tf32), f64, and f16 or bf16 inputs with f32 accumulation and f32 C.
//     tandem is row-major and cuBLAS column-major: C^T = op(B)^T op(A)^T is what cuBLAS computes,
//     so the operands go in swapped, with no copy.
//   cub: cub::DeviceReduce::Reduce (sums, NaN-propagating min/max, a first-index argmax over
//     ArgIndexInputIterator, squares through a transform iterator then a square root for norm2)
//     and cub::DeviceScan (InclusiveSum, ExclusiveSum), through gpu/vendor_variants.hpp with
//     tandem's rules: i32 sums wrap (summed as u32), NaN propagates, argmax is the first NaN or
//     else the first maximum. Up to 2^31 - 1 elements.
#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/iterator/arg_index_input_iterator.cuh>
#include <thrust/iterator/transform_iterator.h>
#include <limits>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "../../core/factories.hpp"
#include "../gpu/device_runtime.hpp"
#include "../gpu/gpu_backend.hpp"
#include "../gpu/vendor_variants.hpp"
#ifdef TANDEM_HAVE_NCCL
#include "nccl_collective.hpp"
#endif

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

// CUB as the `cub` variant (gpu/vendor_variants.hpp): int item counts.
struct Cub {
  static constexpr const char* name = "cub";
  using Stream = cudaStream_t;
  using Error = cudaError_t;
  static constexpr Error success = cudaSuccess;
  static constexpr std::size_t max_items = INT_MAX;
  static std::string error_text(Error e) {
    (void)cudaGetLastError();  // clear it, so that the next call does not report it again
    return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
  }
  template <class In, class Out, class Op, class Init>
  static Error reduce(void* p, std::size_t& b, In in, Out out, std::size_t n, Op op, Init init, Stream s) {
    return cub::DeviceReduce::Reduce(p, b, in, out, static_cast<int>(n), op, init, s);
  }
  template <class T>
  using Pair = cub::KeyValuePair<int, T>;
  template <class T>
  static auto arg_index(const T* in) {
    return cub::ArgIndexInputIterator<const T*, int>(in);
  }
  template <class T>
  static auto squares(const T* in) {
    return thrust::make_transform_iterator(in, Square<T>{});
  }
  template <class S>
  static Error inclusive_sum(void* p, std::size_t& b, const S* in, S* out, std::size_t n, Stream s) {
    return cub::DeviceScan::InclusiveSum(p, b, in, out, static_cast<int>(n), s);
  }
  template <class S>
  static Error exclusive_sum(void* p, std::size_t& b, const S* in, S* out, std::size_t n, Stream s) {
    return cub::DeviceScan::ExclusiveSum(p, b, in, out, static_cast<int>(n), s);
  }
};

class CudaBackend : public gpu::VendorVariants<Cub> {
 public:
  CudaBackend(std::string name, int device) : VendorVariants(std::move(name), device) {}
  ~CudaBackend() override {
    // Never a throw here: a backend held until the process exits is destroyed after the CUDA
    // runtime unloads (cudaErrorCudartUnloading), and the handle goes with it.
    if (runtime().try_make_current()) {
      if (handle_ != nullptr) (void)cublasDestroy(handle_);
      for (void* w : workspaces_) {
        if (w != nullptr) runtime().release(w);
      }
    }
  }

  std::vector<MatmulTier> matmul_tiers(DType t) const override {
    std::vector<MatmulTier> tiers = GpuBackend::matmul_tiers(t);
    if (t != DType::i32) tiers.push_back(MatmulTier::vendor);
    return tiers;
  }

  // `automatic` is cuBLAS wherever it takes the problem: it is faster than the own tiers at every
  // shape, by far on the MLP's thin products. The own tiers stay for teaching and comparison,
  // chosen by name.
  MatmulTier choose_matmul_tier(const GemmArgs& a) const override {
    constexpr std::int64_t int_max = 2147483647;
    const bool fits = std::max({a.m, a.n, a.k, a.lda, a.ldb, a.ldc}) <= int_max;
    if (a.ab_type != DType::i32 && fits) return MatmulTier::vendor;
    return GpuBackend::choose_matmul_tier(a);
  }

  void matmul(Queue q, const GemmArgs& a) override {
    if (a.tier != MatmulTier::vendor) return GpuBackend::matmul(q, a);
    if (a.ab_type == DType::i32) throw DTypeMismatch("matmul: i32 inputs are not offered; use f32, f64, f16 or bf16");
    std::lock_guard lock(mutex_);  // one handle, bound to the caller's stream for the call
    runtime().make_current();
    if (handle_ == nullptr) check(cublasCreate(&handle_), "creating the cuBLAS handle");
    check(cublasSetStream(handle_, runtime().native_stream(queue_stream(q))), "cublasSetStream");
    check(cublasSetWorkspace(handle_, workspace(queue_stream(q)), kWorkspaceBytes), "cublasSetWorkspace");
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

#ifdef TANDEM_HAVE_NCCL
  // NCCL, on this backend's streams (tandem::dist's allreduce of cuda buffers).
  DeviceCollective* collective() override {
    std::lock_guard lock(mutex_);
    if (!nccl_) {
      nccl_ = std::make_unique<NcclCollective>([this](Queue q) {
        runtime().make_current();
        return runtime().native_stream(queue_stream(q));
      });
    }
    return nccl_.get();
  }
#endif

 private:
  // cublasCreate allocates and synchronizes: never inside a capture.
  void before_capture() override {
    std::lock_guard lock(mutex_);
    runtime().make_current();
    if (handle_ == nullptr) check(cublasCreate(&handle_), "creating the cuBLAS handle");
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
  // A cuBLAS workspace per queue (cublasSetStream goes back to the handle's default one, which
  // GEMMs running at once on two queues would share), of the size NVIDIA advises for Hopper.
  // From the device directly, not the caching allocator: it lives as long as the backend, and
  // the memory statistics count the user's buffers. Called under mutex_.
  static constexpr std::size_t kWorkspaceBytes = std::size_t(32) << 20;
  void* workspace(int stream) {
    const auto at = static_cast<std::size_t>(stream);
    if (workspaces_.size() <= at) workspaces_.resize(at + 1, nullptr);
    if (workspaces_[at] == nullptr) {
      workspaces_[at] = runtime().allocate(kWorkspaceBytes);
      if (workspaces_[at] == nullptr) {
        throw OutOfMemory(kWorkspaceBytes, device_free_bytes(), backend_name() + " (cuBLAS workspace)");
      }
    }
    return workspaces_[at];
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
  std::vector<void*> workspaces_;  // by queue
#ifdef TANDEM_HAVE_NCCL
  std::unique_ptr<NcclCollective> nccl_;
#endif
};

}  // namespace

int cuda_device_count(std::string& reason) { return gpu::device_count(reason); }

std::shared_ptr<Backend> make_cuda_backend(int device) {
  return make_backend<CudaBackend>(device == 0 ? "cuda" : "cuda:" + std::to_string(device), device);
}

}  // namespace tandem::detail
