// generic variant of the softmax row pass (softmax.inl).
#define TANDEM_ISA generic
#define TANDEM_VECTOR_BYTES 16
#include "softmax.inl"
