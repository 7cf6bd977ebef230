// AVX-512 variant: a 12 x 32 f32 (12 x 16 f64) register tile, 24 of the 32 zmm registers.
#define TANDEM_ISA avx512
#define TANDEM_VECTOR_BYTES 64
#define TANDEM_MR_F32 12
#define TANDEM_MR_F64 12
#define TANDEM_NV 2
#include "microkernel.inl"
