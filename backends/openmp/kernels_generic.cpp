// The openmp kernels of kernels.inl for the baseline x86-64 (SSE2) and every other CPU. The
// prelude comes first, as in the other ISAs' files.
#define TANDEM_ISA generic
#define TANDEM_ISA_AVX512 0
#define TANDEM_ISA_AVX2 0
#define TANDEM_ISA_SOFTMAX softmax_kernel_generic
// clang-format off
#include "kernels_prelude.hpp"
#include "kernels.inl"
// clang-format on
