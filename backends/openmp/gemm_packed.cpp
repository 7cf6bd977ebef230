// register_blocked tier: GotoBLAS/BLIS-style blocked GEMM.
//   for jc (nc columns of C):            the packed B block (kc, nc) stays in L3
//     for pc (kc of the k dimension):
//       pack op(B)[pc.., jc..] into NR-wide panels, and op(A)[.., pc..] into MR-high panels
//       for each (mc-row block, NR panel) pair:  the A block (mc, kc) stays in L2
//         for each MR panel: micro-kernel on an (MR, NR) tile held in registers
// Packing converts f16/bf16 (and does the transposes), so the micro-kernel only ever sees
// contiguous f32 or f64 panels. Full tiles go straight to C; edge tiles go through a local tile.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string_view>

#include "../host/cpu_info.hpp"
#include "microkernel.hpp"
#include "openmp_backend.hpp"

namespace tandem::openmp {

using host::dispatch_any;
using host::to;

namespace {

// Cache blocking per compute type (multiples of every kernel's MR and NR).
struct Blocking {
  std::int64_t mc, kc, nc;
};
template <class T>
constexpr Blocking blocking() {
  if constexpr (std::is_same_v<T, float>) return {192, 384, 3072};
  return {96, 256, 1536};
}

template <class T>
struct AlignedArray {
  T* data = nullptr;
  explicit AlignedArray(std::size_t n)
      : data(static_cast<T*>(::operator new(std::max<std::size_t>(n, 1) * sizeof(T), std::align_val_t(64)))) {}
  ~AlignedArray() { ::operator delete(data, std::align_val_t(64)); }
  AlignedArray(const AlignedArray&) = delete;
  AlignedArray& operator=(const AlignedArray&) = delete;
};

template <class T>
const MicroKernel<T>& pick() {
  static const MicroKernel<T> chosen = [] {
    if constexpr (std::is_same_v<T, float>) {
#ifdef TANDEM_X86_KERNELS
      if (isa_allowed("avx512")) return microkernel_f32_avx512();
      if (isa_allowed("avx2")) return microkernel_f32_avx2();
#endif
      return microkernel_f32_generic();
    } else {
#ifdef TANDEM_X86_KERNELS
      if (isa_allowed("avx512")) return microkernel_f64_avx512();
      if (isa_allowed("avx2")) return microkernel_f64_avx2();
#endif
      return microkernel_f64_generic();
    }
  }();
  return chosen;
}

template <class TA, class T>
void pack_a(const GemmArgs& g, const TA* a, std::int64_t i0, std::int64_t mb, std::int64_t p0, std::int64_t kb, int mr,
            T* dst) {
  // dst: ceil(mb / mr) panels, each (kb, mr), row i of the panel at [p * mr + i].
  for (std::int64_t panel = 0; panel * mr < mb; ++panel) {
    T* out = dst + panel * kb * mr;
    const std::int64_t rows = std::min<std::int64_t>(mr, mb - panel * mr);
    for (std::int64_t i = 0; i < mr; ++i) {
      const std::int64_t row = i0 + panel * mr + i;
      if (i >= rows) {
        for (std::int64_t p = 0; p < kb; ++p) out[p * mr + i] = T(0);
      } else if (g.trans_a == Transpose::no) {
        const TA* src = a + row * g.lda + p0;
        for (std::int64_t p = 0; p < kb; ++p) out[p * mr + i] = to<T>(src[p]);
      } else {
        for (std::int64_t p = 0; p < kb; ++p) out[p * mr + i] = to<T>(a[(p0 + p) * g.lda + row]);
      }
    }
  }
}

template <class TA, class T>
void pack_b_panel(const GemmArgs& g, const TA* b, std::int64_t p0, std::int64_t kb, std::int64_t col0,
                  std::int64_t cols, int nr, T* out) {
  // out: (kb, nr), column j of the panel at [p * nr + j], zero beyond `cols`.
  for (std::int64_t p = 0; p < kb; ++p) {
    T* row = out + p * nr;
    if (g.trans_b == Transpose::no) {
      const TA* src = b + (p0 + p) * g.ldb + col0;
      for (std::int64_t j = 0; j < cols; ++j) row[j] = to<T>(src[j]);
    } else {
      for (std::int64_t j = 0; j < cols; ++j) row[j] = to<T>(b[(col0 + j) * g.ldb + p0 + p]);
    }
    for (std::int64_t j = cols; j < nr; ++j) row[j] = T(0);
  }
}

template <class TA, class T>
void gemm_packed(const GemmArgs& g, const MicroKernel<T>& uk) {
  constexpr Blocking blk = blocking<T>();
  const int mr = uk.mr, nr = uk.nr;
  const std::int64_t mc = blk.mc / mr * mr, nc = blk.nc / nr * nr, kc = blk.kc;
  const auto* a = static_cast<const TA*>(g.a);
  const auto* b = static_cast<const TA*>(g.b);
  auto* c = static_cast<T*>(g.c);
  const T alpha = T(g.alpha);

  const std::int64_t m_panels = (g.m + mr - 1) / mr;
  AlignedArray<T> apack(static_cast<std::size_t>(m_panels * mr * kc));
  AlignedArray<T> bpack(static_cast<std::size_t>(std::min(nc, (g.n + nr - 1) / nr * nr) * kc));
  const std::int64_t m_blocks = (g.m + mc - 1) / mc;
  const bool parallel = g.m * g.n * g.k >= (1 << 18);

#pragma omp parallel if (parallel)
  {
    alignas(64) T edge[16 * 64];  // one (mr, nr) tile; mr * nr <= 16 * 64 for every kernel
    for (std::int64_t jc = 0; jc < g.n; jc += nc) {
      const std::int64_t nb = std::min(nc, g.n - jc);
      const std::int64_t n_panels = (nb + nr - 1) / nr;
      for (std::int64_t pc = 0; pc < g.k; pc += kc) {
        const std::int64_t kb = std::min(kc, g.k - pc);
        // Pack B's panels and A's mc blocks in parallel; the implicit barrier ends the packing.
#pragma omp for schedule(static) nowait
        for (std::int64_t jp = 0; jp < n_panels; ++jp) {
          pack_b_panel(g, b, pc, kb, jc + jp * nr, std::min<std::int64_t>(nr, nb - jp * nr), nr,
                       bpack.data + jp * kb * nr);
        }
#pragma omp for schedule(static)
        for (std::int64_t ib = 0; ib < m_blocks; ++ib) {
          const std::int64_t i0 = ib * mc;
          pack_a(g, a, i0, std::min(mc, g.m - i0), pc, kb, mr, apack.data + i0 * kb);
        }
        // Work items: (A block, B panel) pairs; static contiguous ranges keep a thread on one A block.
#pragma omp for collapse(2) schedule(static)
        for (std::int64_t ib = 0; ib < m_blocks; ++ib) {
          for (std::int64_t jp = 0; jp < n_panels; ++jp) {
            const std::int64_t i0 = ib * mc, mb = std::min(mc, g.m - i0);
            const std::int64_t col = jc + jp * nr, cols = std::min<std::int64_t>(nr, nb - jp * nr);
            const T* bp = bpack.data + jp * kb * nr;
            for (std::int64_t ip = 0; ip * mr < mb; ++ip) {
              const std::int64_t row = i0 + ip * mr, rows = std::min<std::int64_t>(mr, mb - ip * mr);
              const T* ap = apack.data + i0 * kb + ip * kb * mr;
              T* ctile = c + row * g.ldc + col;
              if (rows == mr && cols == nr) {
                uk.run(kb, ap, bp, alpha, ctile, g.ldc);
              } else {
                std::fill(edge, edge + mr * nr, T(0));
                uk.run(kb, ap, bp, alpha, edge, nr);
                for (std::int64_t i = 0; i < rows; ++i) {
                  for (std::int64_t j = 0; j < cols; ++j) ctile[i * g.ldc + j] += edge[i * nr + j];
                }
              }
            }
          }
        }
        // implicit barrier: the packs are not overwritten while in use
      }
    }
  }
}

}  // namespace

const MicroKernel<float>& best_microkernel_f32() { return pick<float>(); }
const MicroKernel<double>& best_microkernel_f64() { return pick<double>(); }

void matmul_register_blocked(const GemmArgs& g) {
  prescale_c(g);
  dispatch_any(g.ab_type, [&]<class TA>() {
    if constexpr (std::is_same_v<TA, double>) {
      gemm_packed<TA, double>(g, best_microkernel_f64());
    } else if constexpr (!std::is_same_v<TA, std::int32_t>) {
      gemm_packed<TA, float>(g, best_microkernel_f32());
    }
  });
}

}  // namespace tandem::openmp
