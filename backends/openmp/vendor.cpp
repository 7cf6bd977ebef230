// vendor tier: OpenBLAS through CBLAS, for f32 and f64 (row-major, transposes passed through).
#include "openmp_backend.hpp"

#ifdef TANDEM_HAVE_BLAS
#include <cblas.h>
#endif

namespace tandem::openmp {

bool vendor_available() {
#ifdef TANDEM_HAVE_BLAS
  return true;
#else
  return false;
#endif
}

void matmul_vendor(const GemmArgs& g) {
#ifdef TANDEM_HAVE_BLAS
  const auto ta = g.trans_a == Transpose::no ? CblasNoTrans : CblasTrans;
  const auto tb = g.trans_b == Transpose::no ? CblasNoTrans : CblasTrans;
  if (g.ab_type == DType::f32) {
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<blasint>(g.m), static_cast<blasint>(g.n), static_cast<blasint>(g.k),
                static_cast<float>(g.alpha), static_cast<const float*>(g.a), static_cast<blasint>(g.lda),
                static_cast<const float*>(g.b), static_cast<blasint>(g.ldb), static_cast<float>(g.beta),
                static_cast<float*>(g.c), static_cast<blasint>(g.ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, static_cast<blasint>(g.m), static_cast<blasint>(g.n), static_cast<blasint>(g.k),
                g.alpha, static_cast<const double*>(g.a), static_cast<blasint>(g.lda), static_cast<const double*>(g.b),
                static_cast<blasint>(g.ldb), g.beta, static_cast<double*>(g.c), static_cast<blasint>(g.ldc));
  }
#else
  (void)g;
  throw Unsupported("openmp: the vendor tier needs OpenBLAS; rebuild with libopenblas-dev installed");
#endif
}

}  // namespace tandem::openmp
