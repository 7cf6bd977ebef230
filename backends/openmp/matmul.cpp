// matmul tiers of the openmp backend:
//   naive            one output element at a time, rows split over threads; op(B) read down a column.
//   tiled            cache blocking: a (kTileK, kTileN) tile of op(B) is copied once (converted to
//                    the compute type) and reused by every row of A; each row accumulates into a
//                    contiguous, vectorisable strip of C.
//   register_blocked packed panels + an AVX-512 / AVX2 / portable micro-kernel (gemm_packed.cpp).
//   vendor           OpenBLAS through CBLAS (vendor.cpp), f32 and f64.
// f16/bf16 inputs are widened to f32 as they are read; the compute type is f32 for them, else the
// input type.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "openmp_backend.hpp"

namespace tandem::openmp {

using host::dispatch_any;
using host::dispatch_float;
using host::to;

namespace {

// Tunables of the tiled tier: the op(B) tile (k, n) fits in L2; a C strip of n values in L1.
struct TiledTile {
  std::int64_t k, n;
};
constexpr TiledTile kTiled{256, 512};

template <class TA>
using Compute = std::conditional_t<std::is_same_v<TA, double>, double, float>;

// Calls f.template operator()<TA, C, TC>() with the input, compute and output types of g.
template <class F>
void dispatch_gemm(const GemmArgs& g, F&& f) {
  dispatch_any(g.ab_type, [&]<class TA>() {
    if constexpr (!std::is_same_v<TA, std::int32_t>) {
      dispatch_float(g.c_type, [&]<class TC>() { f.template operator()<TA, Compute<TA>, TC>(); });
    }
  });
}

template <class TA>
inline TA at(const TA* m, std::int64_t ld, Transpose t, std::int64_t r, std::int64_t c) {
  return t == Transpose::no ? m[r * ld + c] : m[c * ld + r];
}

}  // namespace

void prescale_c(const GemmArgs& g) {
  dispatch_float(g.c_type, [&]<class TC>() {
    auto* c = static_cast<TC*>(g.c);
    const TC beta = TC(g.beta);
#pragma omp parallel for schedule(static) if (static_cast <std::size_t>(g.m * g.n) >= parallel_from())
    for (std::int64_t i = 0; i < g.m; ++i) {
      TC* row = c + i * g.ldc;
      if (g.beta == 0) {
        std::fill(row, row + g.n, TC(0));
      } else if (g.beta != 1) {
#pragma omp simd
        for (std::int64_t j = 0; j < g.n; ++j) row[j] *= beta;
      }
    }
  });
}

void matmul_naive(const GemmArgs& g) {
  dispatch_gemm(g, [&]<class TA, class C, class TC>() {
    const auto* a = static_cast<const TA*>(g.a);
    const auto* b = static_cast<const TA*>(g.b);
    auto* c = static_cast<TC*>(g.c);
#pragma omp parallel for schedule(static) if (g.m * g.n * g.k >= (1 << 16))
    for (std::int64_t i = 0; i < g.m; ++i) {
      for (std::int64_t j = 0; j < g.n; ++j) {
        C acc = 0;
        for (std::int64_t p = 0; p < g.k; ++p) {
          acc += to<C>(at(a, g.lda, g.trans_a, i, p)) * to<C>(at(b, g.ldb, g.trans_b, p, j));
        }
        TC& cij = c[i * g.ldc + j];
        cij = g.beta == 0 ? TC(C(g.alpha) * acc) : TC(C(g.alpha) * acc + C(g.beta) * C(cij));
      }
    }
  });
}

void matmul_tiled(const GemmArgs& g) {
  const std::int64_t tile_k = kTiled.k, tile_n = kTiled.n;
  prescale_c(g);
  dispatch_gemm(g, [&]<class TA, class C, class TC>() {
    const auto* a = static_cast<const TA*>(g.a);
    const auto* b = static_cast<const TA*>(g.b);
    auto* c = static_cast<TC*>(g.c);
    std::vector<C> btile(static_cast<std::size_t>(tile_k * tile_n));
    // Per-thread C strips, allocated here: an exception must not escape a parallel region.
    std::vector<C> strips(static_cast<std::size_t>(tile_n * omp_get_max_threads()));
    const C alpha = C(g.alpha);
#pragma omp parallel if (g.m * g.n * g.k >= (1 << 16))
    {
      C* strip = strips.data() + tile_n * omp_get_thread_num();
      for (std::int64_t j0 = 0; j0 < g.n; j0 += tile_n) {
        const std::int64_t nb = std::min(tile_n, g.n - j0);
        for (std::int64_t p0 = 0; p0 < g.k; p0 += tile_k) {
          const std::int64_t kb = std::min(tile_k, g.k - p0);
#pragma omp for schedule(static)
          for (std::int64_t p = 0; p < kb; ++p) {
            for (std::int64_t j = 0; j < nb; ++j) btile[p * nb + j] = to<C>(at(b, g.ldb, g.trans_b, p0 + p, j0 + j));
          }
          // implicit barrier: the tile is complete before anyone reads it
#pragma omp for schedule(static)
          for (std::int64_t i = 0; i < g.m; ++i) {
            std::fill(strip, strip + nb, C(0));
            for (std::int64_t p = 0; p < kb; ++p) {
              const C aip = to<C>(at(a, g.lda, g.trans_a, i, p0 + p));
              const C* brow = btile.data() + p * nb;
#pragma omp simd
              for (std::int64_t j = 0; j < nb; ++j) strip[j] += aip * brow[j];
            }
            TC* crow = c + i * g.ldc + j0;
#pragma omp simd
            for (std::int64_t j = 0; j < nb; ++j) crow[j] = TC(C(crow[j]) + alpha * strip[j]);
          }
          // implicit barrier: nobody still reads the tile when the next one is written
        }
      }
    }
  });
}

}  // namespace tandem::openmp
