// register_blocked tier: GotoBLAS/BLIS-style blocked GEMM.
//   for jc (nc columns of C):            the packed B block (kc, nc) stays in L3
//     for pc (kc of the k dimension):
//       pack op(B)[pc.., jc..] into NR-wide panels, and op(A)[.., pc..] into MR-high panels
//       for each mc-row block:                the A block (mc, kc) stays in L2
//         for each (MR panel, NR panel) pair:  micro-kernel on an (MR, NR) tile held in registers,
//           NR panels outer (each B panel stays in L1) or MR panels outer (each A panel does),
//           as Blocking::a_in_l1 says (products of few rows, gemm_shared: NR panels outer)
// Packing converts f16/bf16 (and does the transposes), so the micro-kernel only ever sees
// contiguous f32 or f64 panels. Full tiles go straight to C; edge tiles go through a local tile.
#include <omp.h>
#include <sys/mman.h>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../host/cpu_info.hpp"
#include "microkernel.hpp"
#include "openmp_backend.hpp"
#include "pack_buffer.hpp"
#include "tandem/environment.hpp"
#include "tandem/topology.hpp"

namespace tandem::openmp {

using host::dispatch_any;
using host::to;

void* kept_block(PackSlot slot, std::size_t bytes, void** owned) {
  struct Kept {
    void* ptr = nullptr;
    std::size_t bytes = 0, align = 64;
    void release() {
      ::operator delete(ptr, std::align_val_t(align));
      ptr = nullptr;
      bytes = 0;
    }
    ~Kept() { release(); }
  };
  thread_local Kept kept[3];
  if (bytes > (std::size_t(256) << 20)) {
    *owned = ::operator new(bytes, std::align_val_t(64));
    return *owned;
  }
  Kept& k = kept[static_cast<int>(slot)];
  if (k.bytes < bytes) {
    k.release();
    // Blocks of 2 MiB or more in whole huge pages, where Linux gives them on request (transparent
    // huge pages in madvise mode): the micro-kernels stream panels whose lines lie on many 4 KiB
    // pages.
    constexpr std::size_t kHuge = std::size_t(2) << 20;
    const bool huge = bytes >= kHuge;
    const std::size_t size = huge ? (bytes + kHuge - 1) / kHuge * kHuge : bytes;
    k.align = huge ? kHuge : 64;
    k.ptr = ::operator new(size, std::align_val_t(k.align));
    k.bytes = size;
#ifdef MADV_HUGEPAGE
    if (huge) ::madvise(k.ptr, size, MADV_HUGEPAGE);  // advice: where refused, the block works as it is
#endif
  }
  return k.ptr;
}

void free_block(void* owned) { ::operator delete(owned, std::align_val_t(64)); }

namespace {

// TANDEM_OPENMP_GEMM_BLOCKING=mc,kc,nc, which overrides every other choice (for measuring).
std::optional<Blocking> forced_blocking() {
  static const std::optional<Blocking> forced = []() -> std::optional<Blocking> {
    if (const auto b = env::whole_list("TANDEM_OPENMP_GEMM_BLOCKING", 3, 1, 16384)) {
      return Blocking{std::int64_t((*b)[0]), std::int64_t((*b)[1]), std::int64_t((*b)[2])};
    }
    return std::nullopt;
  }();
  return forced;
}

// TANDEM_OPENMP_GEMM_L1=a|b: which packed panel stays in L1 (Blocking::a_in_l1) in every product
// split by rows (gemm_by_rows), whatever the blocking's source.
std::optional<bool> forced_a_in_l1() {
  static const std::optional<bool> forced = []() -> std::optional<bool> {
    if (!env::text("TANDEM_OPENMP_GEMM_L1")) return std::nullopt;
    return env::choice("TANDEM_OPENMP_GEMM_L1", {"a", "b"}, "b") == "a";
  }();
  return forced;
}

// The blocking of an (m, n, k) product: products of kTunedFrom multiply-adds or more take the
// f32 tuning, measured on the first of them (where it pays: below, the blocks barely fill the
// caches, and the first small product should not wait for a calibration).
constexpr std::int64_t kTunedFrom = std::int64_t(1) << 27;  // 512^3
template <class T>
Blocking blocking(const MicroKernel<T>& uk, std::int64_t m, std::int64_t n, std::int64_t k) {
  Blocking b = table_blocking(uk.isa, std::is_same_v<T, float>);
  if (const auto forced = forced_blocking()) {
    b = *forced;
  } else if constexpr (std::is_same_v<T, float>) {
    if (m * n * k >= kTunedFrom) b = gemm_tuning().blocking;
  }
  if (const auto a_in_l1 = forced_a_in_l1()) b.a_in_l1 = *a_in_l1;
  return b;
}

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

// One MR-high panel of A, (kb, mr) with row i of the panel at [p * mr + i], zero below `rows`.
// Both layouts are walked with p outermost, so the panel is written in order: op(A) = A reads mr
// rows side by side, op(A) = A^T reads mr neighbours of one row (row by row, with the writes mr
// elements apart, packing cost twice as much). MR as a constant where it is one of the kernels'
// (the inner loop unrolled).
template <int MR, class TA, class T>
void pack_a_panel(const GemmArgs& g, const TA* a, std::int64_t row0, std::int64_t rows, std::int64_t p0,
                  std::int64_t kb, int mr_runtime, T* out) {
  const int mr = MR > 0 ? MR : mr_runtime;
  if (rows < mr) {  // the last panel: zero-padded
    for (std::int64_t p = 0; p < kb; ++p) {
      for (int i = 0; i < mr; ++i) {
        out[p * mr + i] = i < rows ? to<T>(g.trans_a == Transpose::no ? a[(row0 + i) * g.lda + p0 + p]
                                                                      : a[(p0 + p) * g.lda + row0 + i])
                                   : T(0);
      }
    }
    return;
  }
  if (g.trans_a == Transpose::no) {
    if constexpr (MR > 0) {
      const TA* src[MR];
      for (int i = 0; i < MR; ++i) src[i] = a + (row0 + i) * g.lda + p0;
      std::int64_t p = 0;
#if defined(__SSE2__)
      if constexpr (std::is_same_v<TA, float> && std::is_same_v<T, float> && MR % 4 == 0) {
        // Four rows by four steps of K at a time, transposed in registers (SSE, which every
        // x86-64 CPU has): the panel's columns are A's rows.
        for (; p + 4 <= kb; p += 4) {
          for (int i = 0; i < MR; i += 4) {
            __m128 r0 = _mm_loadu_ps(src[i] + p), r1 = _mm_loadu_ps(src[i + 1] + p);
            __m128 r2 = _mm_loadu_ps(src[i + 2] + p), r3 = _mm_loadu_ps(src[i + 3] + p);
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            _mm_storeu_ps(out + p * MR + i, r0);
            _mm_storeu_ps(out + (p + 1) * MR + i, r1);
            _mm_storeu_ps(out + (p + 2) * MR + i, r2);
            _mm_storeu_ps(out + (p + 3) * MR + i, r3);
          }
        }
      }
#endif
      for (; p < kb; ++p) {
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) out[p * MR + i] = to<T>(src[i][p]);
      }
    } else {
      for (std::int64_t p = 0; p < kb; ++p) {
        for (int i = 0; i < mr; ++i) out[p * mr + i] = to<T>(a[(row0 + i) * g.lda + p0 + p]);
      }
    }
  } else {
    for (std::int64_t p = 0; p < kb; ++p) {
      const TA* src = a + (p0 + p) * g.lda + row0;
#pragma GCC unroll 16
      for (int i = 0; i < mr; ++i) out[p * mr + i] = to<T>(src[i]);
    }
  }
}

template <class TA, class T>
void pack_a(const GemmArgs& g, std::int64_t i0, std::int64_t mb, std::int64_t p0, std::int64_t kb, int mr, T* dst) {
  // dst: ceil(mb / mr) panels, each (kb, mr).
  const auto* a = static_cast<const TA*>(g.a);
  for (std::int64_t panel = 0; panel * mr < mb; ++panel) {
    T* out = dst + panel * kb * mr;
    const std::int64_t row0 = i0 + panel * mr, rows = std::min<std::int64_t>(mr, mb - panel * mr);
    switch (mr) {  // the kernels' MR (vector_<isa>.cpp)
      case 4:
        pack_a_panel<4>(g, a, row0, rows, p0, kb, mr, out);
        break;
      case 6:
        pack_a_panel<6>(g, a, row0, rows, p0, kb, mr, out);
        break;
      case 12:
        pack_a_panel<12>(g, a, row0, rows, p0, kb, mr, out);
        break;
      default:
        pack_a_panel<0>(g, a, row0, rows, p0, kb, mr, out);
    }
  }
}

// Panels [first, last) of op(B)'s (kb, nb) block at (p0, col0) into NR-wide panels, each (kb, nr)
// with column j of the panel at [p * nr + j], zero beyond nb. op(B) = B is walked row by row
// across all the panels, so each thread reads its part of a row in order (panel by panel, every
// row of a panel would be a new cache line and a new page); op(B) = B^T panel by panel, where a
// panel's columns are rows.
template <class TA, class T>
void pack_b_panels(const GemmArgs& g, std::int64_t p0, std::int64_t kb, std::int64_t col0, std::int64_t nb, int nr,
                   std::int64_t first, std::int64_t last, T* dst) {
  const auto* b = static_cast<const TA*>(g.b);
  if (g.trans_b == Transpose::no) {
    // B's rows are read a piece at a time (the panels of this thread's share), each row a new
    // stream for the hardware prefetcher: the piece kAheadRows rows down is prefetched by hand.
    constexpr std::int64_t kAheadRows = 4;
    for (std::int64_t p = 0; p < kb; ++p) {
      const TA* src = b + (p0 + p) * g.ldb + col0;
      for (std::int64_t jp = first; jp < last; ++jp) {
        T* row = dst + jp * kb * nr + p * nr;
        const std::int64_t cols = std::min<std::int64_t>(nr, nb - jp * nr);
        const TA* s = src + jp * nr;
        if (p + kAheadRows < kb) {
          const char* next = reinterpret_cast<const char*>(s + kAheadRows * g.ldb);
          for (std::size_t line = 0; line < std::size_t(cols) * sizeof(TA); line += 64) __builtin_prefetch(next + line);
        }
        if (cols == nr) {
          for (int j = 0; j < nr; ++j) row[j] = to<T>(s[j]);
        } else {
          for (std::int64_t j = 0; j < nr; ++j) row[j] = j < cols ? to<T>(s[j]) : T(0);
        }
      }
    }
    return;
  }
  for (std::int64_t jp = first; jp < last; ++jp) {
    T* out = dst + jp * kb * nr;
    const std::int64_t cols = std::min<std::int64_t>(nr, nb - jp * nr);
    for (std::int64_t p = 0; p < kb; ++p) {
      for (std::int64_t j = 0; j < nr; ++j)
        out[p * nr + j] = j < cols ? to<T>(b[(col0 + jp * nr + j) * g.ldb + p0 + p]) : T(0);
    }
  }
}

// This thread's even share [first, last) of `count` items (OpenMP's static schedule, without the
// construct, so that each thread can walk its share in its own order).
inline std::pair<std::int64_t, std::int64_t> my_share(std::int64_t count) {
  const std::int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
  return {count * me / threads, count * (me + 1) / threads};
}

// C tile (rows, cols) at ctile (+)= alpha * Ap x Bp (= where `overwrite`), through the local edge
// tile when partial.
template <class T>
inline void tile(const MicroKernel<T>& uk, std::int64_t kb, const T* ap, const T* bp, T alpha, T* ctile,
                 std::int64_t ldc, std::int64_t rows, std::int64_t cols, T* edge, bool overwrite) {
  const int mr = uk.mr, nr = uk.nr;
  if (rows == mr && cols == nr) {
    uk.run(kb, ap, bp, alpha, ctile, ldc, overwrite);
    return;
  }
  uk.run(kb, ap, bp, alpha, edge, nr, true);
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) {
      ctile[i * ldc + j] = overwrite ? edge[i * nr + j] : ctile[i * ldc + j] + edge[i * nr + j];
    }
  }
}

// The threads take C's row blocks (whole MR panels, at most mc rows) from a shared queue, each
// packing the A block it takes, and B's packed block in chunks of panels the same way; the only
// barrier per k block is the one after B is packed. Taken dynamically, a thread that runs slower
// (a core shared with another program, a smaller core) does less of the work instead of
// holding the others at every barrier (split evenly, one busy core made two threads as slow as
// one). The row blocks are as even as they come and their count a multiple of the threads, so
// that equal threads finish together (a split by mc blocks can leave a thread a third idle). B's packed block
// is double-buffered, so packing the next one cannot overwrite the one a slower thread still reads.
template <class TA, class T>
void gemm_by_rows(const GemmArgs& g, const MicroKernel<T>& uk, const Blocking& blk, bool parallel, bool overwrite) {
  const int mr = uk.mr, nr = uk.nr;
  const std::int64_t mc = blk.mc, nc = blk.nc, kc = blk.kc;  // mc, nc: whole tiles (gemm_packed)
  auto* c = static_cast<T*>(g.c);
  const T alpha = T(g.alpha);
  const std::int64_t m_panels = (g.m + mr - 1) / mr;
  const auto b_size = static_cast<std::size_t>(std::min(nc, (g.n + nr - 1) / nr * nr) * kc);
  PackBuffer<T> bpack(PackSlot::b_blocks, 2 * b_size);
  // Every thread's A block, on cache lines of its own, allocated here: an exception (no memory)
  // may not leave the parallel region.
  const int team = parallel ? std::max(omp_get_max_threads(), 1) : 1;
  const auto a_stride = static_cast<std::size_t>((mc * kc * std::int64_t(sizeof(T)) + 63) / 64 * 64) / sizeof(T);
  PackBuffer<T> apacks(PackSlot::a_blocks, a_stride * static_cast<std::size_t>(team));

#pragma omp parallel if (parallel) num_threads(team)
  {
    alignas(64) T edge[16 * 64];  // one (mr, nr) tile; mr * nr <= 16 * 64 for every kernel
    const std::int64_t threads = omp_get_num_threads();
    const std::int64_t by_mc = (m_panels + mc / mr - 1) / (mc / mr);
    const std::int64_t m_blocks = (by_mc + threads - 1) / threads * threads;
    T* const apack = apacks.data + a_stride * static_cast<std::size_t>(omp_get_thread_num());
    std::int64_t step = 0;
    for (std::int64_t jc = 0; jc < g.n; jc += nc) {
      const std::int64_t nb = std::min(nc, g.n - jc);
      const std::int64_t n_panels = (nb + nr - 1) / nr;
      const std::int64_t b_chunk = std::max<std::int64_t>(1, n_panels / (4 * threads));
      for (std::int64_t pc = 0; pc < g.k; pc += kc, ++step) {
        const std::int64_t kb = std::min(kc, g.k - pc);
        T* bp = bpack.data + (step % 2) * b_size;
#pragma omp for schedule(dynamic, 1) nowait
        for (std::int64_t first = 0; first < n_panels; first += b_chunk) {
          pack_b_panels<TA>(g, pc, kb, jc, nb, nr, first, std::min(n_panels, first + b_chunk), bp);
        }
#pragma omp barrier
        // B is packed, and every thread is past the step before the last, whose buffer the next
        // step packs into.
#pragma omp for schedule(dynamic, 1) nowait
        for (std::int64_t block = 0; block < m_blocks; ++block) {
          const std::int64_t i0 = m_panels * block / m_blocks * mr;
          const std::int64_t mb = std::min(g.m, m_panels * (block + 1) / m_blocks * mr) - i0;
          if (mb <= 0) continue;
          pack_a<TA>(g, i0, mb, pc, kb, mr, apack);
          auto one_tile = [&](std::int64_t ip, std::int64_t jp) {
            const std::int64_t row = i0 + ip * mr, col = jc + jp * nr;
            tile(uk, kb, apack + ip * kb * mr, bp + jp * kb * nr, alpha, c + row * g.ldc + col, g.ldc,
                 std::min<std::int64_t>(mr, mb - ip * mr), std::min<std::int64_t>(nr, nb - jp * nr), edge,
                 overwrite && pc == 0);
          };
          const std::int64_t m_panels_here = (mb + mr - 1) / mr;
          if (blk.a_in_l1) {
            for (std::int64_t ip = 0; ip < m_panels_here; ++ip) {
              for (std::int64_t jp = 0; jp < n_panels; ++jp) one_tile(ip, jp);
            }
          } else {
            for (std::int64_t jp = 0; jp < n_panels; ++jp) {
              for (std::int64_t ip = 0; ip < m_panels_here; ++ip) one_tile(ip, jp);
            }
          }
        }
      }
    }
  }
}

// Few rows (fewer MR panels than twice the threads): the threads share A's packed block and
// split the (A block, B panel) pairs instead, so that a wide C with few rows still uses them all.
template <class TA, class T>
void gemm_shared(const GemmArgs& g, const MicroKernel<T>& uk, const Blocking& blk, bool parallel, bool overwrite) {
  const int mr = uk.mr, nr = uk.nr;
  const std::int64_t mc = blk.mc, nc = blk.nc, kc = blk.kc;  // mc, nc: whole tiles (gemm_packed)
  auto* c = static_cast<T*>(g.c);
  const T alpha = T(g.alpha);

  const std::int64_t m_panels = (g.m + mr - 1) / mr;
  PackBuffer<T> apack(PackSlot::a_blocks, static_cast<std::size_t>(m_panels * mr * kc));
  PackBuffer<T> bpack(PackSlot::b_blocks, static_cast<std::size_t>(std::min(nc, (g.n + nr - 1) / nr * nr) * kc));
  const std::int64_t m_blocks = (g.m + mc - 1) / mc;

#pragma omp parallel if (parallel)
  {
    alignas(64) T edge[16 * 64];
    for (std::int64_t jc = 0; jc < g.n; jc += nc) {
      const std::int64_t nb = std::min(nc, g.n - jc);
      const std::int64_t n_panels = (nb + nr - 1) / nr;
      for (std::int64_t pc = 0; pc < g.k; pc += kc) {
        const std::int64_t kb = std::min(kc, g.k - pc);
        // Pack B's panels and A's mc blocks in parallel; the implicit barrier ends the packing.
        {
          const auto [first, last] = my_share(n_panels);
          pack_b_panels<TA>(g, pc, kb, jc, nb, nr, first, last, bpack.data);
        }
#pragma omp for schedule(static)
        for (std::int64_t ib = 0; ib < m_blocks; ++ib) {
          const std::int64_t i0 = ib * mc;
          pack_a<TA>(g, i0, std::min(mc, g.m - i0), pc, kb, mr, apack.data + i0 * kb);
        }
#pragma omp for collapse(2) schedule(static)
        for (std::int64_t ib = 0; ib < m_blocks; ++ib) {
          for (std::int64_t jp = 0; jp < n_panels; ++jp) {
            const std::int64_t i0 = ib * mc, mb = std::min(mc, g.m - i0);
            const std::int64_t col = jc + jp * nr, cols = std::min<std::int64_t>(nr, nb - jp * nr);
            for (std::int64_t ip = 0; ip * mr < mb; ++ip) {
              const std::int64_t row = i0 + ip * mr;
              tile(uk, kb, apack.data + i0 * kb + ip * kb * mr, bpack.data + jp * kb * nr, alpha, c + row * g.ldc + col,
                   g.ldc, std::min<std::int64_t>(mr, mb - ip * mr), cols, edge, overwrite && pc == 0);
            }
          }
        }
        // implicit barrier: the packs are not overwritten while in use
      }
    }
  }
}

// C = alpha op(A) op(B) + C, or with `overwrite` (and k > 0) C = alpha op(A) op(B), C never read;
// on the team when `parallel`, else on the calling thread.
template <class TA, class T>
void gemm_packed(const GemmArgs& g, const MicroKernel<T>& uk, const Blocking& given, bool overwrite, bool parallel) {
  const Blocking blk{std::max<std::int64_t>(given.mc / uk.mr, 1) * uk.mr, given.kc,
                     std::max<std::int64_t>(given.nc / uk.nr, 1) * uk.nr, given.a_in_l1};
  const std::int64_t threads = parallel ? omp_get_max_threads() : 1;
  if ((g.m + uk.mr - 1) / uk.mr >= 2 * threads) {
    gemm_by_rows<TA, T>(g, uk, blk, parallel, overwrite);
  } else {
    gemm_shared<TA, T>(g, uk, blk, parallel, overwrite);
  }
}

}  // namespace

// The table's cache blocking per compute type and micro-kernel (rounded to its MR and NR where
// used). For f32 it is the first candidate of the calibration, which large products use.
Blocking table_blocking(std::string_view isa, bool f32) {
  // AVX2 (6 x 16 f32 tile): kc 256 keeps a (kc, 16) panel of B (16 KiB) and a (6, kc) panel of A
  // (6 KiB) in a 32 KiB L1, where 384 overflowed it.
  if (isa == "avx2" && f32) return {120, 256, 3072};  // Zen 3 EPYC, 1024^3: 86-89% -> 92-95% of OpenBLAS
  return f32 ? Blocking{192, 384, 3072} : Blocking{96, 256, 1536};  // f32: Xeon (AVX-512), 134-136% of OpenBLAS
}

namespace {
std::string blocking_text(const Blocking& b) {
  return "mc " + std::to_string(b.mc) + ", kc " + std::to_string(b.kc) + ", nc " + std::to_string(b.nc) +
         (b.a_in_l1 ? ", A panels in L1" : ", B panels in L1");
}
}  // namespace

bool gemm_blocking_forced() { return forced_blocking().has_value(); }

std::string gemm_blocking_text() {
  const auto a_in_l1 = forced_a_in_l1();
  auto with_order = [&](Blocking b) {
    if (a_in_l1) b.a_in_l1 = *a_in_l1;
    return b;
  };
  const std::string order_note = a_in_l1 ? "; the panel in L1 from TANDEM_OPENMP_GEMM_L1" : "";
  if (const auto forced = forced_blocking()) {
    return blocking_text(with_order(*forced)) + " (TANDEM_OPENMP_GEMM_BLOCKING" + order_note + ")";
  }
  const Blocking table = with_order(table_blocking(pick<float>().isa, true));
  const GemmTuning& t = gemm_tuning();
  const Blocking tuned = with_order(t.blocking);
  std::string text = blocking_text(tuned) + " (" + t.source + order_note + ")";
  if (tuned.mc != table.mc || tuned.kc != table.kc || tuned.nc != table.nc || tuned.a_in_l1 != table.a_in_l1) {
    text += "; products under 512^3: " + blocking_text(table) + " (table: " + pick<float>().isa + ")";
  }
  return text;
}

std::vector<Blocking> gemm_blocking_candidates() {
  const MicroKernel<float>& uk = pick<float>();
  const Blocking table = table_blocking(uk.isa, true);
  std::vector<Blocking> out = {table};
  // Deeper k blocks: fewer passes over C (each of its tiles is loaded and stored once per k
  // block), with the A block cut to stay within half of L2 and the B block within half of L3
  // (the table's where sysfs does not say). nc follows from that rule; the timing below hardly
  // tests it (its n, 2048, is one nc block where nc is 2048 or more).
  const CpuTopology& cpu = cpu_topology();
  const auto l2 = static_cast<std::int64_t>(cpu.l2_bytes), l3 = static_cast<std::int64_t>(cpu.l3_bytes);
  for (const std::int64_t kc : {512, 768, 1024}) {
    if (kc <= table.kc) continue;
    const std::int64_t mc =
        l2 == 0 ? table.mc : std::clamp<std::int64_t>(l2 / 2 / (kc * 4) / uk.mr * uk.mr, uk.mr, table.mc);
    const std::int64_t nc =
        l3 == 0 ? table.nc : std::clamp<std::int64_t>(l3 / 2 / (kc * 4) / uk.nr * uk.nr, uk.nr, table.nc);
    // Not at the cost of an A block under kMinDeepMc rows: B's panel streams from L3 once per A
    // block, so a smaller one multiplies that traffic, which the calibration's (m, 1024) x (1024, n) timing
    // below does not see and larger products pay for.
    constexpr std::int64_t kMinDeepMc = 80;  // mc 60 (Zen 3, 512 KiB L2): 4096^3 at 81-89% of OpenBLAS; 84 did not lose
    if (mc < kMinDeepMc) continue;
    out.push_back({mc, kc, nc});
  }
  // Each in both orders (Blocking::a_in_l1), the B panel in L1 first, the order the tables were
  // tuned in. Neither wins everywhere by reasoning: A panels in L1 stream the B block from L2 or
  // L3 at some 11 bytes a cycle (counted from the AVX2 tile's loads at two FMAs a cycle, not
  // measured), B panels in L1 stream the A block from L2 at 4 but need the
  // (kc, nr) B panel, 16 to 128 KiB, to stay in L1.
  std::vector<Blocking> both;
  for (Blocking b : out) {
    both.push_back(b);
    b.a_in_l1 = true;
    both.push_back(b);
  }
  return both;
}

std::vector<double> measure_gemm_blockings(const std::vector<Blocking>& candidates) {
  // An (m, 1024) x (1024, 2048) product, the power-of-two k of typical products (a kc that does
  // not divide it pays for its tail here, as there), 2048 columns so that B's block is past a
  // 2 MiB L2 as a large product's is, m growing with the threads so that each has rows for two of
  // the table's A blocks (at least 512, up to 32768 rows, 128 MiB of A; past 85 threads of an
  // AVX-512 CPU fewer): about half a second for the candidates' products on two cores.
  const std::int64_t threads = omp_get_max_threads();
  const std::int64_t mc = table_blocking(pick<float>().isa, true).mc;
  const std::int64_t m = std::clamp<std::int64_t>(2 * mc * threads, 512, 32768), n = 2048, k = 1024;
  std::unique_ptr<float[]> a(new (std::nothrow) float[m * k]), b(new (std::nothrow) float[k * n]),
      c(new (std::nothrow) float[m * n]);
  if (!a || !b || !c) return {};
  // Written by all the threads, each a share of the rows: at 64 threads one thread would first
  // touch 188 MiB alone and put every page on its own memory node, where the product's threads,
  // taking row blocks as they come, read from all of them.
  float* const pa = a.get();
  float* const pb = b.get();
  float* const pc = c.get();
#pragma omp parallel
  {
#pragma omp for schedule(static) nowait
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = i * k; j < (i + 1) * k; ++j) pa[j] = float(j % 13) * 0.1f - 0.6f;
      std::fill(pc + i * n, pc + (i + 1) * n, 0.0f);
    }
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < k * n; ++i) pb[i] = float(i % 11) * 0.1f - 0.5f;
  }
  GemmArgs g{};
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = pa;
  g.b = pb;
  g.c = pc;
  g.lda = k;
  g.ldb = n;
  g.ldc = n;
  g.alpha = 1.0;
  const MicroKernel<float>& uk = pick<float>();
  // Two rounds: with both orders there are up to eight candidates, and as many rounds as
  // candidates would cost half a second or more.
  const std::vector<double> seconds = fastest_in_rotating_rounds(
      candidates.size(), 2, [&](std::size_t v) { gemm_packed<float, float>(g, uk, candidates[v], true, true); });
  std::vector<double> gflops;
  for (const double s : seconds) gflops.push_back(s > 0 ? 2.0 * double(m) * double(n) * double(k) / s / 1e9 : 0.0);
  return gflops;
}

const MicroKernel<float>& best_microkernel_f32() { return pick<float>(); }
const MicroKernel<double>& best_microkernel_f64() { return pick<double>(); }

namespace {

// f32 cubes of kMin^3 to kMax^3 timed on one thread and on the team (matmul_parallel_tuning);
// from kAlwaysFrom the team when it never won.
constexpr std::int64_t kMin = 32, kMax = 256, kAlwaysFrom = 8 * kMax * kMax * kMax;

// One e^3 product as it comes in a chain of ops (a layer's forward pass, its gradients): its
// inputs just written on the calling thread, its output read there after, so that the team's time
// includes moving them between the cores' caches. Timed back to back instead, the team found the
// operands already in its caches: on a 2-vCPU Zen 3 EPYC the calibration then sent 48^3 products
// to the team, and the MLP epoch of tandem_bench_busy (products of 32 x 64 x 128) took 17-21 ms on
// two threads against 11-13 on one; timed chained it chose 96^3 or more, and 11-13 ms on both.
void chained_product(std::int64_t e, bool team, const MicroKernel<float>& uk, std::vector<float>& a,
                     std::vector<float>& b, std::vector<float>& c) {
  if (c.empty()) {  // made at the first product, so that a cached result costs none
    a.assign(kMax * kMax, 0.5f);
    b.assign(kMax * kMax, 0.25f);
    c.assign(kMax * kMax, 0.0f);
  }
  for (std::int64_t i = 0; i < e * e; ++i) {
    a[i] += 0.0f;  // a store of the same value (x + 0 is not folded: it turns -0 into +0)
    b[i] += 0.0f;
  }
  GemmArgs g{};
  g.m = g.n = g.k = g.lda = g.ldb = g.ldc = e;
  g.ab_type = g.c_type = DType::f32;
  g.a = a.data();
  g.b = b.data();
  g.c = c.data();
  g.alpha = 1.0;
  gemm_packed<float, float>(g, uk, blocking(uk, e, e, e), true, team);
  // A whole pass over C, as the op after a layer's product (its bias and activation) makes; the
  // adds are a chain the compiler keeps in order, the same cost on both sides. Reading one float
  // a cache line instead, three of six calibrations chose 48^3 or 64^3 on that Zen 3 VM again.
  float sum = 0;
  for (std::int64_t i = 0; i < e * e; ++i) sum += c[i];
  volatile float kept = sum;
  (void)kept;
}

Crossover resolve_matmul_parallel() {
  // Below kTunedFrom, so that blocking() never waits for gemm_tuning() in here.
  static_assert(kMax * kMax * kMax < kTunedFrom);
  std::vector<float> a, b, c;
  const MicroKernel<float>& uk = pick<float>();
  Crossover t = resolve_crossover({"matmul-parallel",
                                   {{"kernel", uk.isa}, {"timed", "chained"}},
                                   {kMin, 48, 64, 96, 128, 192, kMax},
                                   kMatmulParallelTable,
                                   "f32 chained: the team's time over one thread's",
                                   true},
                                  [&](std::int64_t e, bool team) { chained_product(e, team, uk, a, b, c); });
  if (t.from == kNever) t.from = kAlwaysFrom;
  return t;
}

}  // namespace

const Crossover& matmul_parallel_tuning() {
  static const Crossover tuning = [] {
    const ThreadsScope whole(whole_team());
    return resolve_matmul_parallel();
  }();
  return tuning;
}

bool matmul_on_team(std::int64_t multiply_adds) {
  if (multiply_adds < kMin * kMin * kMin) return false;
  if (multiply_adds >= kAlwaysFrom) return true;
  return multiply_adds >= matmul_parallel_tuning().from;
}

void matmul_register_blocked(const GemmArgs& g) {
  // With beta = 0 the first k block writes C without reading it (BLAS: C's old values, NaN
  // included, do not count), which saves zeroing C and reading it back. With k = 0 there is no k
  // block (the ops layer handles that case before the backend; C = beta C here too).
  const bool overwrite = g.beta == 0 && g.k > 0;
  if (!overwrite) prescale_c(g);
  const bool parallel = matmul_on_team(g.m * g.n * g.k);
  dispatch_any(g.ab_type, [&]<class TA>() {
    if constexpr (std::is_same_v<TA, double>) {
      gemm_packed<TA, double>(g, best_microkernel_f64(), blocking(best_microkernel_f64(), g.m, g.n, g.k), overwrite,
                              parallel);
    } else if constexpr (!std::is_same_v<TA, std::int32_t>) {
      gemm_packed<TA, float>(g, best_microkernel_f32(), blocking(best_microkernel_f32(), g.m, g.n, g.k), overwrite,
                             parallel);
    }
  });
}

}  // namespace tandem::openmp
