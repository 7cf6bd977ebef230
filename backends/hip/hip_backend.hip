// The hip backend: the GPU Backend of backends/gpu over the HIP runtime (compiled by clang -x hip
// for AMD GPUs). The same sources as the cuda backend; only the runtime's names differ. What only
// ROCm has:
//   rocprim: rocPRIM's device-wide reduce and scan as the `rocprim` variant of reduce and scan (the
//     peer of tandem's own variants in the benchmark), with tandem's rules (vendor_semantics.hpp).
//   vendor matmul: it would be rocBLAS, which Debian 12 does not package: asking for it says so.
#include <iostream>  // rocPRIM 5.3's debug paths use std::cout without including it
#include <rocprim/device/device_reduce.hpp>
#include <rocprim/device/device_scan.hpp>
#include <rocprim/iterator/arg_index_iterator.hpp>
#include <rocprim/iterator/transform_iterator.hpp>

#include "../../core/factories.hpp"
#include "../gpu/device_runtime.hpp"
#include "../gpu/gpu_backend.hpp"
#include "../gpu/vendor_semantics.hpp"

namespace tandem::detail {

namespace {

using namespace gpu::vendor;

class HipBackend : public gpu::GpuBackend<gpu::DeviceRuntime> {
 public:
  HipBackend(std::string name, int device) : GpuBackend(std::move(name), device) {}

  std::vector<std::string> variants(std::string_view algorithm) const override {
    std::vector<std::string> v = GpuBackend::variants(algorithm);
    if (algorithm == "reduce" || algorithm == "scan") v.emplace_back("rocprim");
    return v;
  }

  void reduce(Queue q, ReduceOp op, DType t, std::size_t n, const void* x, void* result,
              std::string_view variant) override {
    if (variant != "rocprim") return GpuBackend::reduce(q, op, t, n, x, result, variant);
    const hipStream_t s = runtime().native_stream(queue_stream(q));
    runtime().make_current();
    dispatch_numeric(t, [&]<class T>() {
      const T* in = static_cast<const T*>(x);
      // Each rocPRIM call twice: once for the temporary storage it needs, once to run.
      auto run = [&](auto&& call) {
        std::size_t bytes = 0;
        hip_check(call(nullptr, bytes), "rocprim (sizing)");
        Scratch tmp(*this, q, bytes);
        hip_check(call(tmp.ptr, bytes), "rocprim");
      };
      switch (op) {
        case ReduceOp::sum: {
          using S = SumType<T>;
          const S* sin = reinterpret_cast<const S*>(in);
          S* out = static_cast<S*>(result);
          return run([&](void* p, std::size_t& b) { return rocprim::reduce(p, b, sin, out, S(0), n, Plus<S>{}, s); });
        }
        case ReduceOp::max:
          return run([&](void* p, std::size_t& b) {
            return rocprim::reduce(p, b, in, static_cast<T*>(result), lowest<T>(), n, NanMax<T>{}, s);
          });
        case ReduceOp::min:
          return run([&](void* p, std::size_t& b) {
            return rocprim::reduce(p, b, in, static_cast<T*>(result), highest<T>(), n, NanMin<T>{}, s);
          });
        case ReduceOp::argmax: {
          // n <= INT32_MAX: ops::reduce refuses a longer argmax (its result is an i32).
          using Pair = rocprim::key_value_pair<int, T>;
          Scratch best(*this, q, sizeof(Pair));
          Pair* pair = static_cast<Pair*>(best.ptr);
          rocprim::arg_index_iterator<const T*, int> it(in);
          run([&](void* p, std::size_t& b) {
            return rocprim::reduce(p, b, it, pair, Pair(INT32_MAX, lowest<T>()), n, FirstArgMax<Pair>{}, s);
          });
          runtime().launch(queue_stream(q), gpu::LaunchConfig{"rocprim_argmax_key", {1, 1, 1}, {1, 1, 1}, 0},
                           copy_key<Pair>, static_cast<const Pair*>(pair), static_cast<std::int32_t*>(result));
          return;
        }
        case ReduceOp::norm2:
          if constexpr (std::is_same_v<T, std::int32_t>) {
            throw DTypeMismatch("reduce: norm2 of i32 is not offered");
          } else {
            rocprim::transform_iterator<const T*, Square<T>, T> squares(in, Square<T>{});
            run([&](void* p, std::size_t& b) {
              return rocprim::reduce(p, b, squares, static_cast<T*>(result), T(0), n, Plus<T>{}, s);
            });
            runtime().launch(queue_stream(q), gpu::LaunchConfig{"rocprim_norm2_sqrt", {1, 1, 1}, {1, 1, 1}, 0},
                             sqrt_in_place<T>, static_cast<T*>(result));
            return;
          }
      }
    });
  }

  void scan(Queue q, ScanKind kind, DType t, std::size_t n, const void* x, void* out,
            std::string_view variant) override {
    if (variant != "rocprim") return GpuBackend::scan(q, kind, t, n, x, out, variant);
    if (n == 0) return;
    const hipStream_t s = runtime().native_stream(queue_stream(q));
    runtime().make_current();
    dispatch_numeric(t, [&]<class T>() {
      using S = SumType<T>;
      const S* in = static_cast<const S*>(x);
      S* o = static_cast<S*>(out);
      auto call = [&](void* p, std::size_t& b) {
        return kind == ScanKind::inclusive ? rocprim::inclusive_scan(p, b, in, o, n, Plus<S>{}, s)
                                           : rocprim::exclusive_scan(p, b, in, o, S(0), n, Plus<S>{}, s);
      };
      std::size_t bytes = 0;
      hip_check(call(nullptr, bytes), "rocprim scan (sizing)");
      Scratch tmp(*this, q, bytes);
      hip_check(call(tmp.ptr, bytes), "rocprim scan");
    });
  }

  void matmul(Queue q, const GemmArgs& a) override {
    if (a.tier == MatmulTier::vendor) {
      throw Unsupported("matmul: the vendor tier of '" + backend_name() +
                        "' would be rocBLAS, which Debian 12 (ROCm 5.2) does not package; use register_blocked");
    }
    GpuBackend::matmul(q, a);
  }

 private:
  void hip_check(hipError_t e, const char* what) const {
    if (e == hipSuccess) return;
    (void)hipGetLastError();
    throw DeviceError(std::string(what) + " on " + backend_name() + ": " + hipGetErrorName(e) + " (" +
                      hipGetErrorString(e) + ")");
  }
};

}  // namespace

int hip_device_count(std::string& reason) { return gpu::device_count(reason); }

std::shared_ptr<Backend> make_hip_backend(int device) {
  return make_backend<HipBackend>(device == 0 ? "hip" : "hip:" + std::to_string(device), device);
}

}  // namespace tandem::detail
