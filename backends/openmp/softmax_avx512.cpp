// avx512 variant of the softmax row pass (softmax.inl).
#define TANDEM_ISA avx512
#define TANDEM_VECTOR_BYTES 64
#include "softmax.inl"
