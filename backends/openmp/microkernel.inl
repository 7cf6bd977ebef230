// Included by vector_<isa>.cpp, each compiled with its own -m flags, with
//   TANDEM_ISA            namespace and name of this variant (avx512, avx2, generic)
//   TANDEM_VECTOR_BYTES   bytes per vector register (64, 32, 16)
//   TANDEM_MR_F32 / TANDEM_MR_F64   rows of the register tile
//   TANDEM_NV             vectors per row of the register tile (NR = NV * lanes)
// This file must not use inline functions from other headers (std::min and friends): the linker
// could keep this TU's copy, compiled for a wider ISA, for the whole program.
#include <cstdint>

#include "microkernel.hpp"

namespace tandem::openmp {
namespace TANDEM_ISA {
namespace {

template <class T, int MR, int NV>
void kernel(std::int64_t kc, const T* __restrict ap, const T* __restrict bp, T alpha, T* __restrict c, std::int64_t ldc,
            bool overwrite) {
  typedef T vec __attribute__((vector_size(TANDEM_VECTOR_BYTES)));
  constexpr int lanes = TANDEM_VECTOR_BYTES / sizeof(T);
  vec acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[i][j] = vec{};
  }
  // The tile of C is read after the loop: asked for now, it is in cache by then.
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    __builtin_prefetch(c + i * ldc, 1, 3);
    __builtin_prefetch(c + i * ldc + NV * lanes - 1, 1, 3);
  }
#pragma GCC unroll 4
  for (std::int64_t p = 0; p < kc; ++p) {
    vec b[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) __builtin_memcpy(&b[j], bp + (p * NV + j) * lanes, sizeof(vec));
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const T a = ap[p * MR + i];
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[i][j] += a * b[j];
    }
  }
  if (overwrite) {  // C = alpha A B: C is not read (beta = 0 must not keep a NaN that was there)
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        const vec cv = alpha * acc[i][j];
        __builtin_memcpy(c + i * ldc + j * lanes, &cv, sizeof(vec));
      }
    }
    return;
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      vec cv;
      __builtin_memcpy(&cv, c + i * ldc + j * lanes, sizeof(vec));
      cv += alpha * acc[i][j];
      __builtin_memcpy(c + i * ldc + j * lanes, &cv, sizeof(vec));
    }
  }
}

void run_f32(std::int64_t kc, const float* ap, const float* bp, float alpha, float* c, std::int64_t ldc,
             bool overwrite) {
  kernel<float, TANDEM_MR_F32, TANDEM_NV>(kc, ap, bp, alpha, c, ldc, overwrite);
}
void run_f64(std::int64_t kc, const double* ap, const double* bp, double alpha, double* c, std::int64_t ldc,
             bool overwrite) {
  kernel<double, TANDEM_MR_F64, TANDEM_NV>(kc, ap, bp, alpha, c, ldc, overwrite);
}

}  // namespace
}  // namespace TANDEM_ISA

#define TANDEM_CAT2(a, b) a##b
#define TANDEM_CAT(a, b) TANDEM_CAT2(a, b)
#define TANDEM_STR2(a) #a
#define TANDEM_STR(a) TANDEM_STR2(a)

MicroKernel<float> TANDEM_CAT(microkernel_f32_, TANDEM_ISA)() {
  return {TANDEM_STR(TANDEM_ISA), TANDEM_MR_F32, TANDEM_NV * TANDEM_VECTOR_BYTES / 4, &TANDEM_ISA::run_f32};
}
MicroKernel<double> TANDEM_CAT(microkernel_f64_, TANDEM_ISA)() {
  return {TANDEM_STR(TANDEM_ISA), TANDEM_MR_F64, TANDEM_NV * TANDEM_VECTOR_BYTES / 8, &TANDEM_ISA::run_f64};
}

}  // namespace tandem::openmp
