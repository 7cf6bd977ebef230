// The openmp kernels of kernels.inl for AVX2 + FMA CPUs.
#define TANDEM_ISA avx2
#define TANDEM_ISA_AVX512 0
#define TANDEM_ISA_SOFTMAX softmax_kernel_avx2
#include "kernels_prelude.hpp"
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
#include "kernels.inl"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
