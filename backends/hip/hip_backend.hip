// The hip backend: the GPU Backend of backends/gpu over the HIP runtime (compiled by clang -x hip
// for AMD GPUs). The same sources as the cuda backend; only the runtime's names differ. What only
// ROCm has:
//   rocprim: rocPRIM's device-wide reduce and scan as the `rocprim` variant of reduce and scan (the
//     peer of tandem's own variants in the benchmark), with tandem's rules (vendor_semantics.hpp).
//   vendor matmul: it would be rocBLAS, which Debian 12 does not package: asking for it says so.
#include <cstdint>
#include <iostream>  // rocPRIM 5.3's debug paths use std::cout without including it
#include <rocprim/device/device_reduce.hpp>
#include <rocprim/device/device_scan.hpp>
#include <rocprim/iterator/arg_index_iterator.hpp>
#include <rocprim/iterator/transform_iterator.hpp>

#include "../../core/factories.hpp"
#include "../gpu/device_runtime.hpp"
#include "../gpu/gpu_backend.hpp"
#include "../gpu/vendor_variants.hpp"

namespace tandem::detail {

namespace {

using namespace gpu::vendor;

// rocPRIM as the `rocprim` variant (gpu/vendor_variants.hpp): size_t item counts.
struct Rocprim {
  static constexpr const char* name = "rocprim";
  using Stream = hipStream_t;
  using Error = hipError_t;
  static constexpr Error success = hipSuccess;
  static constexpr std::size_t max_items = SIZE_MAX;
  static std::string error_text(Error e) {
    (void)hipGetLastError();  // clear it, so that the next call does not report it again
    return std::string(hipGetErrorName(e)) + " (" + hipGetErrorString(e) + ")";
  }
  template <class In, class Out, class Op, class Init>
  static Error reduce(void* p, std::size_t& b, In in, Out out, std::size_t n, Op op, Init init, Stream s) {
    return rocprim::reduce(p, b, in, out, init, n, op, s);
  }
  template <class T>
  using Pair = rocprim::key_value_pair<int, T>;
  template <class T>
  static auto arg_index(const T* in) {
    return rocprim::arg_index_iterator<const T*, int>(in);
  }
  template <class T>
  static auto squares(const T* in) {
    return rocprim::transform_iterator<const T*, Square<T>, T>(in, Square<T>{});
  }
  template <class S>
  static Error inclusive_sum(void* p, std::size_t& b, const S* in, S* out, std::size_t n, Stream s) {
    return rocprim::inclusive_scan(p, b, in, out, n, Plus<S>{}, s);
  }
  template <class S>
  static Error exclusive_sum(void* p, std::size_t& b, const S* in, S* out, std::size_t n, Stream s) {
    return rocprim::exclusive_scan(p, b, in, out, S(0), n, Plus<S>{}, s);
  }
};

class HipBackend : public gpu::VendorVariants<Rocprim> {
 public:
  HipBackend(std::string name, int device) : VendorVariants(std::move(name), device) {}

  void matmul(Queue q, const GemmArgs& a) override {
    if (a.tier == MatmulTier::vendor) {
      throw Unsupported("matmul: the vendor tier of '" + backend_name() +
                        "' would be rocBLAS, which Debian 12 (ROCm 5.2) does not package; use register_blocked");
    }
    GpuBackend::matmul(q, a);
  }
};

}  // namespace

int hip_device_count(std::string& reason) { return gpu::device_count(reason); }

std::shared_ptr<Backend> make_hip_backend(int device) {
  return make_backend<HipBackend>(device == 0 ? "hip" : "hip:" + std::to_string(device), device);
}

}  // namespace tandem::detail
