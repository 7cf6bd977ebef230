// The register-blocked micro-kernel: C (MR, NR) tile (+)= alpha * sum_p Ap[p][0..MR) x Bp[p][0..NR),
// with Ap and Bp packed panels (zero-padded). One source (microkernel.inl) is compiled three
// times with different ISA flags; the fastest one this CPU runs is picked at run time.
#pragma once

#include <cstdint>

namespace tandem::openmp {

template <class T>
struct MicroKernel {
  const char* isa;  // "avx512", "avx2", "generic"
  int mr, nr;
  // c points at the tile's first element; ldc is C's leading dimension. overwrite: C = alpha Ap Bp
  // without reading C (the first k block of a product with beta = 0), else C += alpha Ap Bp.
  void (*run)(std::int64_t kc, const T* ap, const T* bp, T alpha, T* c, std::int64_t ldc, bool overwrite);
};

// Cache blocking of the register_blocked tier: an (mc, kc) block of A, a (kc, nc) block of B,
// and which packed panel the micro-kernel calls share. a_in_l1 false: each (kc, nr) panel of B
// stays in L1 while the (mr, kc) panels of the A block (in L2) stream past it; true: each A
// panel stays in L1 while the B block's panels (in L2 or L3) stream past it (OpenBLAS's order;
// it wins where a k block's B panel no longer fits in L1 beside the A panels).
struct Blocking {
  std::int64_t mc, kc, nc;
  bool a_in_l1 = false;
};

// The kernels compiled in (see microkernel_*.cpp).
MicroKernel<float> microkernel_f32_avx512();
MicroKernel<double> microkernel_f64_avx512();
MicroKernel<float> microkernel_f32_avx2();
MicroKernel<double> microkernel_f64_avx2();
MicroKernel<float> microkernel_f32_generic();
MicroKernel<double> microkernel_f64_generic();

// The best kernel for this CPU; TANDEM_CPU_ISA=generic|avx2|avx512 caps the choice (for tests
// of every path and for comparisons).
const MicroKernel<float>& best_microkernel_f32();
const MicroKernel<double>& best_microkernel_f64();

}  // namespace tandem::openmp
