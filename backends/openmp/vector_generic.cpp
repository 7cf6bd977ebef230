// The openmp kernels with the portable vectors (SSE2 on x86-64, whatever 16-byte vectors the target
// has elsewhere): the GEMM micro-kernel (a 4 x 8 f32, 4 x 4 f64 register tile; microkernel.inl) and
// the softmax row pass (softmax.inl).
#define TANDEM_ISA generic
#define TANDEM_VECTOR_BYTES 16
#define TANDEM_MR_F32 4
#define TANDEM_MR_F64 4
#define TANDEM_NV 2
// clang-format off
#include "microkernel.inl"
#include "softmax.inl"
// clang-format on
