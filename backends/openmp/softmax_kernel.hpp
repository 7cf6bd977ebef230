// The softmax row pass of the openmp backend in f32, compiled once per ISA (softmax.inl) and
// chosen at run time like the matmul micro-kernel (TANDEM_CPU_ISA caps it).
#pragma once

#include <cstdint>

namespace tandem::openmp {

struct SoftmaxKernel {
  const char* isa;
  // p[c] = exp(x[c] - m) for c < cols; returns their sum. NaN in, NaN out; x[c] = -Inf gives 0.
  float (*exp_row)(std::int64_t cols, const float* x, float m, float* p);
};

SoftmaxKernel softmax_kernel_avx512();
SoftmaxKernel softmax_kernel_avx2();
SoftmaxKernel softmax_kernel_generic();

// Each ISA's kernels (kernels.inl) call their own; there is no run-time choice here.

}  // namespace tandem::openmp
