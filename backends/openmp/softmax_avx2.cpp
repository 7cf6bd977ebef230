// avx2 variant of the softmax row pass (softmax.inl).
#define TANDEM_ISA avx2
#define TANDEM_VECTOR_BYTES 32
#include "softmax.inl"
