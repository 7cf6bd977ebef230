// The openmp kernels of kernels.inl for AVX-512 CPUs (F, VL).
#define TANDEM_ISA avx512
#define TANDEM_ISA_AVX512 1
#define TANDEM_ISA_SOFTMAX softmax_kernel_avx512
#include "kernels_prelude.hpp"
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512vl,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx2,fma")
#endif
#include "kernels.inl"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
