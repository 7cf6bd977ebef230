// Included by kernels_<isa>.cpp after kernels_prelude.hpp, with
//   TANDEM_ISA          the namespace and name of this variant (avx512, avx2, generic)
//   TANDEM_ISA_TARGET   the GCC/clang target it is compiled for ("avx2,fma"; unset: baseline)
//   TANDEM_ISA_AVX512   1 where the scan may take its AVX-512 pass (scan_avx512.cpp)
//   TANDEM_ISA_AVX2     1 where it may take its AVX2 pass (scan_avx2.cpp)
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

}  // namespace
}  // namespace TANDEM_ISA

#define TANDEM_CAT2(a, b) a##b
#define TANDEM_CAT(a, b) TANDEM_CAT2(a, b)
#define TANDEM_STR2(a) #a
#define TANDEM_STR(a) TANDEM_STR2(a)

CpuKernels TANDEM_CAT(cpu_kernels_, TANDEM_ISA)() {
  namespace e = TANDEM_ISA::elementwise;
  namespace r = TANDEM_ISA::reductions;
  return {TANDEM_STR(TANDEM_ISA),
          &e::binary,
          &e::unary,
          &e::axpy,
          &e::scale,
          &e::fill,
          &e::add_row_vector,
          &e::bias_activation,
          &e::matrix_add,
          &e::transpose,
          &e::gather_rows,
          &e::convert,
          &e::adam_step,
          &r::reduce,
          &r::dot,
          &r::mse,
          &r::reduce_rows,
          &r::reduce_cols,
          &r::softmax_cross_entropy,
          &TANDEM_ISA::scans::scan,
          &e::measure_store_variants};
}

}  // namespace tandem::openmp

#if defined(TANDEM_ISA_TARGET) && defined(__clang__)
TANDEM_PRAGMA(clang attribute pop)
#elif defined(TANDEM_ISA_TARGET)
TANDEM_PRAGMA(GCC pop_options)
#endif
