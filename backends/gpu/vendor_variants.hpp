// A vendor's device-wide reduce and scan as the `vendor` variant of a GPU backend (CUB on cuda,
// rocPRIM on hip): the peer the benchmark compares tandem's own variants with, answering with tandem's rules
// (vendor_semantics.hpp). Written once; a Lib struct maps the calls onto the vendor's library:
//   name, Stream, Error, success, max_items (the largest n the library takes),
//   error_text(e), reduce(tmp, bytes, in, out, n, op, init, stream) for any input iterator,
//   Pair<T> (key: index, value: element) and arg_index(in) (an iterator of such pairs),
//   squares(in) (an iterator of in[i]^2), inclusive_sum / exclusive_sum(tmp, bytes, in, out, n, stream).
// Every library call runs twice: once to size its temporary storage, once to run in it.
// Compiled by nvcc or clang -x hip only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "device_runtime.hpp"
#include "gpu_backend.hpp"
#include "vendor_semantics.hpp"

namespace tandem::gpu {

template <class Lib>
class VendorVariants : public GpuBackend<DeviceRuntime> {
 public:
  using GpuBackend::GpuBackend;

  // The queue's stream, for kernels of the user's own (tandem/kernels.hpp).
  void* native_queue(Queue q) override { return this->runtime().native_stream(this->queue_stream(q)); }

  std::vector<ReduceVariant> reduce_variants() const override {
    std::vector<ReduceVariant> v = GpuBackend::reduce_variants();
    v.push_back(ReduceVariant::vendor);
    return v;
  }
  std::vector<ScanVariant> scan_variants() const override {
    std::vector<ScanVariant> v = GpuBackend::scan_variants();
    v.push_back(ScanVariant::vendor);
    return v;
  }

  void reduce(Queue q, ReduceOp op, DType t, std::size_t n, const void* x, void* result,
              ReduceVariant variant) override {
    if (variant != ReduceVariant::vendor) return GpuBackend::reduce(q, op, t, n, x, result, variant);
    check_count(n, "reduce");
    const auto s = stream_of(q);
    detail::dispatch_numeric(t, [&]<class T>() {
      using namespace vendor;
      const T* in = static_cast<const T*>(x);
      auto run = [&](auto&& call) { run_twice(q, call, "reduce"); };
      switch (op) {
        case ReduceOp::sum: {
          using S = SumType<T>;
          S* out = static_cast<S*>(result);
          const S* sin = reinterpret_cast<const S*>(in);
          return run([&](void* p, std::size_t& b) { return Lib::reduce(p, b, sin, out, n, Plus<S>{}, S(0), s); });
        }
        case ReduceOp::max:
          return run([&](void* p, std::size_t& b) {
            return Lib::reduce(p, b, in, static_cast<T*>(result), n, NanMax<T>{}, lowest<T>(), s);
          });
        case ReduceOp::min:
          return run([&](void* p, std::size_t& b) {
            return Lib::reduce(p, b, in, static_cast<T*>(result), n, NanMin<T>{}, highest<T>(), s);
          });
        case ReduceOp::argmax: {
          // n <= INT32_MAX: ops::reduce refuses a longer argmax (its result is an i32).
          using Pair = typename Lib::template Pair<T>;
          Scratch best(*this, q, sizeof(Pair));
          Pair* pair = static_cast<Pair*>(best.ptr);
          const auto it = Lib::arg_index(in);
          run([&](void* p, std::size_t& b) {
            return Lib::reduce(p, b, it, pair, n, FirstArgMax<Pair>{}, Pair(INT32_MAX, lowest<T>()), s);
          });
          runtime().launch(queue_stream(q), LaunchConfig{"vendor_argmax_key", {1, 1, 1}, {1, 1, 1}, 0}, copy_key<Pair>,
                           static_cast<const Pair*>(pair), static_cast<std::int32_t*>(result));
          return;
        }
        case ReduceOp::norm2:
          if constexpr (std::is_same_v<T, std::int32_t>) {
            throw DTypeMismatch("reduce: norm2 of i32 is not offered");
          } else {
            const auto squares = Lib::squares(in);
            run([&](void* p, std::size_t& b) {
              return Lib::reduce(p, b, squares, static_cast<T*>(result), n, Plus<T>{}, T(0), s);
            });
            runtime().launch(queue_stream(q), LaunchConfig{"vendor_norm2_sqrt", {1, 1, 1}, {1, 1, 1}, 0},
                             sqrt_in_place<T>, static_cast<T*>(result));
            return;
          }
      }
    });
  }

  void scan(Queue q, ScanKind kind, DType t, std::size_t n, const void* x, void* out,
            ScanVariant variant) override {
    if (variant != ScanVariant::vendor) return GpuBackend::scan(q, kind, t, n, x, out, variant);
    if (n == 0) return;
    check_count(n, "scan");
    const auto s = stream_of(q);
    detail::dispatch_numeric(t, [&]<class T>() {
      using S = vendor::SumType<T>;
      const S* in = static_cast<const S*>(x);
      S* o = static_cast<S*>(out);
      run_twice(
          q,
          [&](void* p, std::size_t& b) {
            return kind == ScanKind::inclusive ? Lib::inclusive_sum(p, b, in, o, n, s)
                                               : Lib::exclusive_sum(p, b, in, o, n, s);
          },
          "scan");
    });
  }

 private:
  typename Lib::Stream stream_of(Queue q) {
    runtime().make_current();
    return runtime().native_stream(queue_stream(q));
  }
  void check_count(std::size_t n, const char* what) const {
    if (n > Lib::max_items) {
      throw Unsupported(std::string(what) + ": the vendor variant (" + Lib::name + ") takes up to " +
                        std::to_string(Lib::max_items) + " elements, not " + std::to_string(n) +
                        "; use tandem's own variants");
    }
  }
  // call(nullptr, bytes) sizes the temporary storage; call(storage, bytes) runs.
  template <class Call>
  void run_twice(Queue q, Call&& call, const char* what) {
    std::size_t bytes = 0;
    check(call(nullptr, bytes), what, "sizing");
    Scratch tmp(*this, q, bytes);
    check(call(tmp.ptr, bytes), what, "running");
  }
  void check(typename Lib::Error e, const char* what, const char* step) const {
    if (e == Lib::success) return;
    throw DeviceError(std::string(Lib::name) + " " + what + " (" + step + ") on " + backend_name() + ": " +
                      Lib::error_text(e));
  }
};

}  // namespace tandem::gpu
