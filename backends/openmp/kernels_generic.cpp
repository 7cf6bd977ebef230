// The openmp kernels of kernels.inl for the baseline x86-64 (SSE2) and every other CPU.
#define TANDEM_ISA generic
#define TANDEM_ISA_AVX512 0
#define TANDEM_ISA_SOFTMAX softmax_kernel_generic
#include "kernels_prelude.hpp"  // before the kernels, as in the other ISAs' files

#include "kernels.inl"
