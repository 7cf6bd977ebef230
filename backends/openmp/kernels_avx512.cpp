// The openmp kernels of kernels.inl for AVX-512 CPUs (F, VL).
#define TANDEM_ISA avx512
#define TANDEM_ISA_TARGET "avx512f,avx512vl,avx2,fma"
#define TANDEM_ISA_AVX512 1
#define TANDEM_ISA_AVX2 0
#define TANDEM_ISA_SOFTMAX softmax_kernel_avx512
// clang-format off
#include "kernels_prelude.hpp"
#include "kernels.inl"
// clang-format on
