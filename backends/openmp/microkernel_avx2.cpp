// AVX2 + FMA variant: a 6 x 16 f32 (6 x 8 f64) register tile, 12 of the 16 ymm registers.
#define TANDEM_ISA avx2
#define TANDEM_VECTOR_BYTES 32
#define TANDEM_MR_F32 6
#define TANDEM_MR_F64 6
#define TANDEM_NV 2
#include "microkernel.inl"
