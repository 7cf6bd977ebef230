// GEMM kernels, C (m, n) = alpha * op(A) (m, k) * op(B) (k, n) + beta * C, row-major, in three
// tiers: naive (one output per thread), tiled (16 x 16 shared-memory tiles), register_blocked
// (64 x 64 or 128 x 128 block tiles, 4 x 4 or 8 x 8 outputs per thread in registers, vectorised
// loads, double-buffered shared memory). TA is the storage type of A and B; TC the compute and C type (f32 for
// f16/bf16). The tiled and register_blocked tiers take a full-tile path without bounds checks wherever a whole tile
// lies inside the matrices, and a checked partial-tile path at the edges.
#pragma once

#include "common.hpp"

namespace tandem::gpu::kernels {
inline namespace TANDEM_GPU_ABI {

template <class TA, class TC>
struct Gemm {
  std::int64_t m, n, k;
  TC alpha, beta;  // beta == 0: C is not read
  const TA* a;
  std::int64_t lda;
  bool trans_a;
  const TA* b;
  std::int64_t ldb;
  bool trans_b;
  TC* c;
  std::int64_t ldc;
  bool vector_a, vector_b;  // 16 bytes of stored elements may be loaded at once (aligned base and rows)
};

template <class TA, class TC>
TANDEM_DEVICE TC load_a(const Gemm<TA, TC>& g, std::int64_t i, std::int64_t p) {
  return to_compute<TC>(g.trans_a ? g.a[p * g.lda + i] : g.a[i * g.lda + p]);
}
template <class TA, class TC>
TANDEM_DEVICE TC load_b(const Gemm<TA, TC>& g, std::int64_t p, std::int64_t j) {
  return to_compute<TC>(g.trans_b ? g.b[j * g.ldb + p] : g.b[p * g.ldb + j]);
}
template <class TA, class TC>
TANDEM_DEVICE void store_c(const Gemm<TA, TC>& g, std::int64_t i, std::int64_t j, TC acc) {
  TC& out = g.c[i * g.ldc + j];
  out = g.beta == TC(0) ? g.alpha * acc : g.alpha * acc + g.beta * out;
}

// ---- naive: one output per thread, block (16, 16) ----
template <class TA, class TC>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void matmul_naive_kernel(Gemm<TA, TC> g) {
  for (std::int64_t i = std::int64_t(block_idx().y) * block_dim().y + thread_idx().y; i < g.m;
       i += std::int64_t(grid_dim().y) * block_dim().y) {
    for (std::int64_t j = std::int64_t(block_idx().x) * block_dim().x + thread_idx().x; j < g.n;
         j += std::int64_t(grid_dim().x) * block_dim().x) {
      TC acc = 0;
      for (std::int64_t p = 0; p < g.k; ++p) acc += load_a(g, i, p) * load_b(g, p, j);
      store_c(g, i, j, acc);
    }
  }
}

// ---- tiled: block (16, 16) computes a 16 x 16 tile of C through shared tiles of A and B ----
inline constexpr unsigned kTile = 16;
template <class TA, class TC>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void matmul_tiled_kernel(Gemm<TA, TC> g) {
  constexpr unsigned T = kTile;
  TANDEM_SHARED(TC, as, [T][T + 1]);
  TANDEM_SHARED(TC, bs, [T][T + 1]);
  const unsigned tx = thread_idx().x, ty = thread_idx().y;
  const std::int64_t tiles_m = (g.m + T - 1) / T, tiles_n = (g.n + T - 1) / T;
  for (std::int64_t bi = block_idx().y; bi < tiles_m; bi += grid_dim().y) {
    for (std::int64_t bj = block_idx().x; bj < tiles_n; bj += grid_dim().x) {
      const std::int64_t i0 = bi * T, j0 = bj * T, i = i0 + ty, j = j0 + tx;
      const bool full_mn = i0 + T <= g.m && j0 + T <= g.n;
      TC acc = 0;
      for (std::int64_t p0 = 0; p0 < g.k; p0 += T) {
        if (full_mn && p0 + T <= g.k) {  // full tile
          as[ty][tx] = load_a(g, i, p0 + tx);
          bs[ty][tx] = load_b(g, p0 + ty, j);
        } else {  // partial tile: zeros outside the matrices
          as[ty][tx] = (i < g.m && p0 + tx < g.k) ? load_a(g, i, p0 + tx) : TC(0);
          bs[ty][tx] = (p0 + ty < g.k && j < g.n) ? load_b(g, p0 + ty, j) : TC(0);
        }
        sync_threads();
        for (unsigned q = 0; q < T; ++q) acc += as[ty][q] * bs[q][tx];
        sync_threads();
      }
      if (i < g.m && j < g.n) store_c(g, i, j, acc);
    }
  }
}

// ---- register_blocked: 256 threads, each computing TM x TN outputs of a BM x BN tile of C ----
// Two shapes: 64 x 64 tiles with 4 x 4 per thread and k-slices of 16 (Small), and 128 x 128 with
// 8 x 8 per thread and k-slices of 8 (Large: twice the multiply-adds per shared-memory load, for
// f32 matrices with enough tiles to fill the GPU). A thread's rows are TM / 4 runs of 4 consecutive
// ones, 64 apart (so a warp's reads of 4 consecutive values hit distinct banks); so are its
// columns.
template <unsigned BM, unsigned BN, unsigned BK, unsigned TM, unsigned TN>
struct RegisterTiling {
  static constexpr unsigned block_m = BM, block_n = BN, block_k = BK, thread_m = TM, thread_n = TN;
  static constexpr unsigned threads = (BM / TM) * (BN / TN);
  static_assert(threads == 256 && BM * BK == 4 * threads && BN * BK == 4 * threads,
                "every thread loads 4 elements of each operand per k-slice");
  static_assert(TM % 4 == 0 && TN % 4 == 0 && BM * 4 / TM == 64 && BN * 4 / TN == 64,
                "a thread's rows and columns are runs of 4, 64 apart");
};
using RegisterSmall = RegisterTiling<64, 64, 16, 4, 4>;
using RegisterLarge = RegisterTiling<128, 128, 8, 8, 8>;

// Loads 4 consecutive stored elements starting at p, at once when `vector`.
template <class TC, class TA>
TANDEM_DEVICE void load4(const TA* p, bool vector, TC (&out)[4]) {
  if constexpr (std::is_same_v<TA, TC> && (sizeof(TA) == 4 || sizeof(TA) == 8)) {
    if (vector) {
      constexpr unsigned P = Pack<TA>::size;  // 4 floats or 2 doubles
      for (unsigned h = 0; h < 4 / P; ++h) {
        const Pack<TA> v = load_pack(p + h * P);
        for (unsigned e = 0; e < P; ++e) out[h * P + e] = v.v[e];
      }
      return;
    }
  }
  for (unsigned e = 0; e < 4; ++e) out[e] = to_compute<TC>(p[e]);
}

// The 4 stored elements thread t loads of an operand panel of BO (outer) x BK (depth): outer
// rows o0.. of A or columns o0.. of B, depth p0... When depth is contiguous in memory (A not
// transposed, B transposed) the thread takes outer t / (BK / 4), depth (t % (BK / 4)) * 4 + 0..3;
// otherwise depth t / (BO / 4), outer (t % (BO / 4)) * 4 + 0..3. Either way it reads 4
// consecutive stored elements (at once when `vector`). Outside the matrix (outer >= outer_n or
// depth >= k) the values are zeros.
template <unsigned BO, unsigned BK, class TC, class TA>
TANDEM_DEVICE void fetch_panel(const TA* base, std::int64_t ld, bool depth_contiguous, unsigned t, std::int64_t o0,
                               std::int64_t outer_n, std::int64_t p0, std::int64_t k, bool full, bool vector,
                               TC (&v)[4]) {
  // (slow, fast): the stored row and the first of the 4 consecutive stored columns
  const std::int64_t slow = depth_contiguous ? o0 + t / (BK / 4) : p0 + t / (BO / 4);
  const std::int64_t fast = depth_contiguous ? p0 + (t % (BK / 4)) * 4 : o0 + (t % (BO / 4)) * 4;
  const TA* row = base + slow * ld;
  if (full) return load4(row + fast, vector, v);
  const std::int64_t slow_n = depth_contiguous ? outer_n : k, fast_n = depth_contiguous ? k : outer_n;
  for (unsigned e = 0; e < 4; ++e) v[e] = (slow < slow_n && fast + e < fast_n) ? to_compute<TC>(row[fast + e]) : TC(0);
}
// Stores those 4 values into the depth-major shared tile [depth][outer].
template <unsigned BO, unsigned BK, class TC, class Tile>
TANDEM_DEVICE void put_panel(bool depth_contiguous, unsigned t, const TC (&v)[4], Tile& tile) {
  for (unsigned e = 0; e < 4; ++e) {
    if (depth_contiguous) {
      tile[(t % (BK / 4)) * 4 + e][t / (BK / 4)] = v[e];
    } else {
      tile[t / (BO / 4)][(t % (BO / 4)) * 4 + e] = v[e];
    }
  }
}

// Both operands' tiles, twice (double-buffered), 16-byte aligned with rows of a multiple of 16
// bytes, so a thread reads its 4 consecutive values at once.
template <class TC, class L>
struct alignas(16) RegisterTiles {
  TC a[2][L::block_k][L::block_m + 4];
  TC b[2][L::block_k][L::block_n + 4];
};
// 4 consecutive values of a shared tile row (p 16-byte aligned) into out[0..3].
template <class TC>
TANDEM_DEVICE void read4(const TC* p, TC* out) {
  constexpr unsigned P = Pack<TC>::size;
  for (unsigned h = 0; h < 4 / P; ++h) {
    const Pack<TC> v = load_pack(p + h * P);
    for (unsigned e = 0; e < P; ++e) out[h * P + e] = v.v[e];
  }
}

template <class L, class TA, class TC>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void matmul_register_kernel(Gemm<TA, TC> g) {
  constexpr unsigned BM = L::block_m, BN = L::block_n, BK = L::block_k, TM = L::thread_m, TN = L::thread_n;
  // While the block computes on one buffer, the next k-slice is loaded into registers and then
  // stored into the other, so one barrier per k-slice suffices.
  using Tiles = RegisterTiles<TC, L>;
  TANDEM_SHARED(Tiles, tiles);
  const unsigned t = thread_rank();
  const unsigned tm = t / (BN / TN), tn = t % (BN / TN);
  const std::int64_t tiles_m = (g.m + BM - 1) / BM, tiles_n = (g.n + BN - 1) / BN;
  const std::int64_t slices = (g.k + BK - 1) / BK;
  for (std::int64_t bi = block_idx().y; bi < tiles_m; bi += grid_dim().y) {
    for (std::int64_t bj = block_idx().x; bj < tiles_n; bj += grid_dim().x) {
      const std::int64_t i0 = bi * BM, j0 = bj * BN;
      const bool full_mn = i0 + BM <= g.m && j0 + BN <= g.n;
      TC acc[TM][TN] = {};
      TC va[4], vb[4];
      if (slices > 0) {
        const bool full = full_mn && BK <= g.k;
        fetch_panel<BM, BK>(g.a, g.lda, !g.trans_a, t, i0, g.m, 0, g.k, full, g.vector_a, va);
        fetch_panel<BN, BK>(g.b, g.ldb, g.trans_b, t, j0, g.n, 0, g.k, full, g.vector_b, vb);
        put_panel<BM, BK>(!g.trans_a, t, va, tiles.a[0]);
        put_panel<BN, BK>(g.trans_b, t, vb, tiles.b[0]);
      }
      sync_threads();
      for (std::int64_t s = 0; s < slices; ++s) {
        const unsigned cur = static_cast<unsigned>(s & 1);
        const bool more = s + 1 < slices;
        if (more) {
          const std::int64_t p0 = (s + 1) * BK;
          const bool full = full_mn && p0 + BK <= g.k;
          fetch_panel<BM, BK>(g.a, g.lda, !g.trans_a, t, i0, g.m, p0, g.k, full, g.vector_a, va);
          fetch_panel<BN, BK>(g.b, g.ldb, g.trans_b, t, j0, g.n, p0, g.k, full, g.vector_b, vb);
        }
        for (unsigned q = 0; q < BK; ++q) {
          TC fa[TM], fb[TN];
          for (unsigned r = 0; r < TM / 4; ++r) read4(&tiles.a[cur][q][r * 64 + tm * 4], fa + r * 4);
          for (unsigned c = 0; c < TN / 4; ++c) read4(&tiles.b[cur][q][c * 64 + tn * 4], fb + c * 4);
          for (unsigned r = 0; r < TM; ++r) {
            for (unsigned c = 0; c < TN; ++c) acc[r][c] += fa[r] * fb[c];
          }
        }
        if (more) {
          put_panel<BM, BK>(!g.trans_a, t, va, tiles.a[cur ^ 1u]);
          put_panel<BN, BK>(g.trans_b, t, vb, tiles.b[cur ^ 1u]);
        }
        sync_threads();
      }
      for (unsigned r = 0; r < TM; ++r) {
        const std::int64_t i = i0 + (r / 4) * 64 + tm * 4 + r % 4;
        for (unsigned c = 0; c < TN; ++c) {
          const std::int64_t j = j0 + (c / 4) * 64 + tn * 4 + c % 4;
          if (full_mn || (i < g.m && j < g.n)) store_c(g, i, j, acc[r][c]);
        }
      }
    }
  }
}

}  // namespace TANDEM_GPU_ABI
}  // namespace tandem::gpu::kernels
