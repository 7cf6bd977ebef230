// The openmp kernels of kernels.inl for AVX2 + FMA CPUs.
#define TANDEM_ISA avx2
#define TANDEM_ISA_TARGET "avx2,fma"
#define TANDEM_ISA_AVX512 0
#define TANDEM_ISA_AVX2 1
#define TANDEM_ISA_SOFTMAX softmax_kernel_avx2
// clang-format off
#include "kernels_prelude.hpp"
#include "kernels.inl"
// clang-format on
