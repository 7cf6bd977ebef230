// The openmp backend of one ISA: its kernels (elementwise.inl, reduce.inl, scan.inl) and the
// class whose primitives call them (Kernels, made as Owned<Kernels>). A new primitive is its kernel and its method
// here. Included by kernels_<isa>.cpp after kernels_prelude.hpp, with
//   TANDEM_ISA          the namespace and name of this variant (avx512, avx2, generic)
//   TANDEM_ISA_TARGET   the GCC/clang target it is compiled for ("avx2,fma"; unset: baseline)
//   TANDEM_ISA_AVX512   1 where the scan may take its AVX-512 pass (vector_avx512.cpp)
//   TANDEM_ISA_AVX2     1 where it may take its AVX2 pass (vector_avx2.cpp)
//   TANDEM_ISA_SOFTMAX  this ISA's softmax row pass (softmax_kernel.hpp)
// Everything is in this variant's own namespace, so no template or helper of one ISA can be
// merged by the linker with another's; the target applies from here on, after every header.

#define TANDEM_PRAGMA(x) _Pragma(#x)
// One more level, so that the target's macro is expanded before it is made a string.
#define TANDEM_CLANG_TARGET(t) TANDEM_PRAGMA(clang attribute push(__attribute__((target(t))), apply_to = function))
#define TANDEM_GCC_TARGET(t) TANDEM_PRAGMA(GCC target(t))
#if defined(TANDEM_ISA_TARGET) && defined(__clang__)
TANDEM_CLANG_TARGET(TANDEM_ISA_TARGET)
#elif defined(TANDEM_ISA_TARGET)
TANDEM_PRAGMA(GCC push_options)
TANDEM_GCC_TARGET(TANDEM_ISA_TARGET)
#endif

namespace tandem::openmp {
namespace TANDEM_ISA {
namespace {

using host::dispatch_any;
using host::dispatch_float;
using host::dispatch_numeric;
using host::dispatch_real;
using host::from;

namespace elementwise {
#include "elementwise.inl"
}  // namespace elementwise
namespace reductions {
#include "reduce.inl"
}  // namespace reductions
namespace scans {
#include "scan.inl"
}  // namespace scans

// The backend of this ISA: every primitive calls its kernel here, directly.
class Kernels : public OpenMPBackend {
 public:
  void binary(Queue q, BinaryOp op, DType t, std::size_t n, const void* x, const void* y, void* out) override {
    const TeamScope team = enter(q);
    elementwise::binary(op, t, n, x, y, out, stream_from_bytes());
  }
  void unary(Queue q, UnaryOp op, DType t, std::size_t n, const void* x, void* out) override {
    const TeamScope team = enter(q);
    elementwise::unary(op, t, n, x, out, stream_from_bytes());
  }
  void axpy(Queue q, DType t, std::size_t n, double alpha, const void* x, void* y) override {
    const TeamScope team = enter(q);
    elementwise::axpy(t, n, alpha, x, y, stream_from_bytes());
  }
  void scale(Queue q, DType t, std::size_t n, double alpha, const void* x, void* out) override {
    const TeamScope team = enter(q);
    elementwise::scale(t, n, alpha, x, out, stream_from_bytes());
  }
  void fill(Queue q, DType t, std::size_t n, double value, void* out) override {
    const TeamScope team = enter(q);
    elementwise::fill(t, n, value, out, stream_from_bytes());
  }
  void add_row_vector(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                      const void* bias, void* out, std::int64_t ldo) override {
    const TeamScope team = enter(q);
    elementwise::add_row_vector(t, rows, cols, x, ldx, bias, out, ldo);
  }
  void bias_activation(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                       const void* bias, UnaryOp act, void* z, std::int64_t ldz, void* out, std::int64_t ldo) override {
    const TeamScope team = enter(q);
    elementwise::bias_activation(t, rows, cols, x, ldx, bias, act, z, ldz, out, ldo);
  }
  void matrix_add(Queue q, DType t, std::int64_t rows, std::int64_t cols, double alpha, const void* a, std::int64_t lda,
                  double beta, const void* b, std::int64_t ldb, void* c, std::int64_t ldc) override {
    const TeamScope team = enter(q);
    elementwise::matrix_add(t, rows, cols, alpha, a, lda, beta, b, ldb, c, ldc);
  }
  void transpose(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* a, std::int64_t lda, void* out,
                 std::int64_t ldo) override {
    const TeamScope team = enter(q);
    elementwise::transpose(t, rows, cols, a, lda, out, ldo);
  }
  void gather_rows(Queue q, DType t, std::int64_t rows, std::int64_t cols, const std::int32_t* index,
                   std::int64_t x_rows, const void* x, std::int64_t ldx, void* out, std::int64_t ldo) override {
    const TeamScope team = enter(q);
    elementwise::gather_rows(t, rows, cols, index, x_rows, x, ldx, out, ldo);
  }
  void convert(Queue q, DType from, DType to, std::size_t n, const void* x, void* out) override {
    const TeamScope team = enter(q);
    elementwise::convert(from, to, n, x, out);
  }
  void adam_step(Queue q, DType t, std::size_t n, const AdamParams& p, void* w, const void* g, void* m,
                 void* v) override {
    const TeamScope team = enter(q);
    elementwise::adam_step(t, n, p, w, g, m, v);
  }
  void reduce(Queue q, ReduceOp op, DType t, std::size_t n, const void* x, void* result, ReduceVariant) override {
    const TeamScope team = enter(q);
    // min, max and argmax do not prefetch: they neither need the calibration nor wait for it.
    const bool sums = op == ReduceOp::sum || op == ReduceOp::norm2;
    const std::size_t bytes = n * size_of(t);
    if (const SumLoops* avx2 = sums ? narrower(bytes) : nullptr)
      return avx2->reduce(op, t, n, x, result, reduce_prefetch(bytes));
    reductions::reduce(op, t, n, x, result, sums ? reduce_prefetch(bytes) : kReducePrefetchTable);
  }
  void dot(Queue q, DType t, std::size_t n, const void* x, const void* y, void* result) override {
    const TeamScope team = enter(q);
    const std::size_t bytes = (x == y ? 1 : 2) * n * size_of(t);
    if (const SumLoops* avx2 = narrower(bytes)) return avx2->dot(t, n, x, y, result, reduce_prefetch(bytes));
    reductions::dot(t, n, x, y, result, reduce_prefetch(bytes));
  }
  void mse(Queue q, DType t, std::size_t n, const void* a, const void* b, void* result) override {
    const TeamScope team = enter(q);
    const std::size_t bytes = (a == b ? 1 : 2) * n * size_of(t);
    if (const SumLoops* avx2 = narrower(bytes)) return avx2->mse(t, n, a, b, result, reduce_prefetch(bytes));
    reductions::mse(t, n, a, b, result, reduce_prefetch(bytes));
  }
  void reduce_rows(Queue q, ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                   void* out) override {
    const TeamScope team = enter(q);
    reductions::reduce_rows(op, t, rows, cols, x, ldx, out);
  }
  void reduce_cols(Queue q, ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                   void* out) override {
    const TeamScope team = enter(q);
    reductions::reduce_cols(op, t, rows, cols, x, ldx, out);
  }
  void softmax_cross_entropy(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* logits,
                             std::int64_t ld_logits, const std::int32_t* labels, void* probs, std::int64_t ld_probs,
                             void* losses) override {
    const TeamScope team = enter(q);
    reductions::softmax_cross_entropy(t, rows, cols, logits, ld_logits, labels, probs, ld_probs, losses);
  }
  void scan(Queue q, ScanKind kind, DType t, std::size_t n, const void* x, void* out, ScanVariant) override {
    const TeamScope team = enter(q);
    // Like the stores, the prefetch is tuned for data past the last-level cache; a smaller scan
    // takes the table's and does not wait for a calibration.
    if ((x == out ? 1 : 2) * n * size_of(t) < stream_from_bytes()) {
      scans::scan(kind, t, n, x, out, SIZE_MAX, kScanPrefetchTable);
      return;
    }
    const StoreTuning& tune = store_tuning();
    scans::scan(kind, t, n, x, out, tune.stream ? stream_from_bytes() : SIZE_MAX, tune.scan_prefetch);
  }

 private:
  // The AVX2 loops where a sum of `bytes` of distinct inputs goes to them instead (AVX-512 only),
  // else null.
  const SumLoops* narrower(std::size_t bytes) const {
#if TANDEM_ISA_AVX512
    if (narrow_sums(bytes)) return &sum_loops_avx2();
#endif
    (void)bytes;
    return nullptr;
  }
};

class Sums final : public SumLoops {
 public:
  void reduce(ReduceOp op, DType t, std::size_t n, const void* x, void* result, ReadPrefetch pf) const override {
    reductions::reduce(op, t, n, x, result, pf);
  }
  void dot(DType t, std::size_t n, const void* x, const void* y, void* result, ReadPrefetch pf) const override {
    reductions::dot(t, n, x, y, result, pf);
  }
  void mse(DType t, std::size_t n, const void* a, const void* b, void* result, ReadPrefetch pf) const override {
    reductions::mse(t, n, a, b, result, pf);
  }
};

class Loops final : public CalibrationLoops {
 public:
  std::vector<StoreVariant> store_variants(const CalibrationArrays& arrays, int reps) const override {
    return elementwise::measure_store_variants(arrays, reps);
  }
  void dot(std::size_t n, const float* x, const float* y, float* result, ReadPrefetch pf) const override {
    reductions::dot(DType::f32, n, x, y, result, pf);
  }
  void scan(std::size_t n, const float* x, float* out, std::size_t stream_from, ReadPrefetch pf) const override {
    scans::scan(ScanKind::inclusive, DType::f32, n, x, out, stream_from, pf);
  }
  void add(std::size_t n, const float* a, const float* b, float* c, bool team) const override {
    const auto count = static_cast<std::int64_t>(n);
    if (team) {
#pragma omp parallel for simd schedule(static)
      for (std::int64_t i = 0; i < count; ++i) c[i] = a[i] + b[i];
    } else {
#pragma omp simd
      for (std::int64_t i = 0; i < count; ++i) c[i] = a[i] + b[i];
    }
  }
};

}  // namespace
}  // namespace TANDEM_ISA

#define TANDEM_CAT2(a, b) a##b
#define TANDEM_CAT(a, b) TANDEM_CAT2(a, b)

std::shared_ptr<Backend> TANDEM_CAT(make_openmp_backend_, TANDEM_ISA)() {
  return detail::make_backend<TANDEM_ISA::Kernels>();
}

const CalibrationLoops& TANDEM_CAT(calibration_loops_, TANDEM_ISA)() {
  static const TANDEM_ISA::Loops loops;
  return loops;
}

#if TANDEM_ISA_AVX2
// The AVX2 kernels' sums, for the AVX-512 backend (Kernels::narrower).
const SumLoops& sum_loops_avx2() {
  static const TANDEM_ISA::Sums sums;
  return sums;
}
#endif

}  // namespace tandem::openmp

#if defined(TANDEM_ISA_TARGET) && defined(__clang__)
TANDEM_PRAGMA(clang attribute pop)
#elif defined(TANDEM_ISA_TARGET)
TANDEM_PRAGMA(GCC pop_options)
#endif
