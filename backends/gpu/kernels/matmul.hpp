// GEMM kernels, C (m, n) = alpha * op(A) (m, k) * op(B) (k, n) + beta * C, row-major, in three
// tiers: naive (one output per thread), tiled (16 x 16 shared-memory tiles), register_blocked
// (64 x 64 block tiles, 4 x 4 outputs per thread in registers, vectorised loads, double-buffered
// shared memory). TA is the storage type of A and B; TC the compute and C type (f32 for f16/bf16).
// The tiled and register_blocked tiers take a full-tile path without bounds checks wherever a
// whole tile lies inside the matrices, and a checked partial-tile path at the edges.
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
  bool vector_a, vector_b;  // 4 consecutive stored elements may be loaded at once (aligned, TA = TC)
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

// ---- register_blocked: 256 threads, a 64 x 64 tile of C, 4 x 4 outputs per thread ----
inline constexpr unsigned kBlockM = 64, kBlockN = 64, kBlockK = 16, kThreadM = 4, kThreadN = 4;
inline constexpr unsigned kRegisterThreads = (kBlockM / kThreadM) * (kBlockN / kThreadN);

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

// The 4 stored elements thread t loads of an operand panel of 64 (outer) x 16 (depth): outer
// rows o0.. of A or columns o0.. of B, depth p0... When depth is contiguous in memory (A not
// transposed, B transposed) the thread takes outer t/4, depth (t%4)*4 + 0..3; otherwise depth
// t/16, outer (t%16)*4 + 0..3. Either way it reads 4 consecutive stored elements (at once when
// `vector`). Outside the matrix (outer >= outer_n or depth >= k) the values are zeros.
template <class TC, class TA>
TANDEM_DEVICE void fetch_panel(const TA* base, std::int64_t ld, bool depth_contiguous, unsigned t, std::int64_t o0,
                               std::int64_t outer_n, std::int64_t p0, std::int64_t k, bool full, bool vector,
                               TC (&v)[4]) {
  // (slow, fast): the stored row and the first of the 4 consecutive stored columns
  const std::int64_t slow = depth_contiguous ? o0 + t / 4 : p0 + t / 16;
  const std::int64_t fast = depth_contiguous ? p0 + (t % 4) * 4 : o0 + (t % 16) * 4;
  const TA* row = base + slow * ld;
  if (full) return load4(row + fast, vector, v);
  const std::int64_t slow_n = depth_contiguous ? outer_n : k, fast_n = depth_contiguous ? k : outer_n;
  for (unsigned e = 0; e < 4; ++e) v[e] = (slow < slow_n && fast + e < fast_n) ? to_compute<TC>(row[fast + e]) : TC(0);
}
// Stores those 4 values into the depth-major shared tile [depth][outer].
template <class TC, class Tile>
TANDEM_DEVICE void put_panel(bool depth_contiguous, unsigned t, const TC (&v)[4], Tile& tile) {
  for (unsigned e = 0; e < 4; ++e) {
    if (depth_contiguous) {
      tile[(t % 4) * 4 + e][t / 4] = v[e];
    } else {
      tile[t / 16][(t % 16) * 4 + e] = v[e];
    }
  }
}
template <class TA, class TC>
TANDEM_DEVICE void fetch_a(const Gemm<TA, TC>& g, unsigned t, std::int64_t i0, std::int64_t p0, bool full, TC (&v)[4]) {
  fetch_panel(g.a, g.lda, !g.trans_a, t, i0, g.m, p0, g.k, full, g.vector_a, v);
}
template <class TA, class TC>
TANDEM_DEVICE void fetch_b(const Gemm<TA, TC>& g, unsigned t, std::int64_t p0, std::int64_t j0, bool full, TC (&v)[4]) {
  fetch_panel(g.b, g.ldb, g.trans_b, t, j0, g.n, p0, g.k, full, g.vector_b, v);
}

template <class TA, class TC>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void matmul_register_kernel(Gemm<TA, TC> g) {
  // Two buffers of each tile: while the block computes on one, the next k-slice is loaded
  // into registers and then stored into the other, so one barrier per k-slice suffices.
  TANDEM_SHARED(TC, as, [2][kBlockK][kBlockM + 4]);
  TANDEM_SHARED(TC, bs, [2][kBlockK][kBlockN + 4]);
  const unsigned t = thread_rank();
  const unsigned tm = t / (kBlockN / kThreadN), tn = t % (kBlockN / kThreadN);
  const std::int64_t tiles_m = (g.m + kBlockM - 1) / kBlockM, tiles_n = (g.n + kBlockN - 1) / kBlockN;
  const std::int64_t slices = (g.k + kBlockK - 1) / kBlockK;
  for (std::int64_t bi = block_idx().y; bi < tiles_m; bi += grid_dim().y) {
    for (std::int64_t bj = block_idx().x; bj < tiles_n; bj += grid_dim().x) {
      const std::int64_t i0 = bi * kBlockM, j0 = bj * kBlockN;
      const bool full_mn = i0 + kBlockM <= g.m && j0 + kBlockN <= g.n;
      TC acc[kThreadM][kThreadN] = {};
      TC va[4], vb[4];
      if (slices > 0) {
        const bool full = full_mn && kBlockK <= g.k;
        fetch_a(g, t, i0, 0, full, va);
        fetch_b(g, t, 0, j0, full, vb);
        put_panel(!g.trans_a, t, va, as[0]);
        put_panel(g.trans_b, t, vb, bs[0]);
      }
      sync_threads();
      for (std::int64_t s = 0; s < slices; ++s) {
        const unsigned cur = static_cast<unsigned>(s & 1);
        const bool more = s + 1 < slices;
        if (more) {
          const std::int64_t p0 = (s + 1) * kBlockK;
          const bool full = full_mn && p0 + kBlockK <= g.k;
          fetch_a(g, t, i0, p0, full, va);
          fetch_b(g, t, p0, j0, full, vb);
        }
        for (unsigned q = 0; q < kBlockK; ++q) {
          TC fa[kThreadM], fb[kThreadN];
          for (unsigned r = 0; r < kThreadM; ++r) fa[r] = as[cur][q][tm * kThreadM + r];
          for (unsigned c = 0; c < kThreadN; ++c) fb[c] = bs[cur][q][tn * kThreadN + c];
          for (unsigned r = 0; r < kThreadM; ++r) {
            for (unsigned c = 0; c < kThreadN; ++c) acc[r][c] += fa[r] * fb[c];
          }
        }
        if (more) {
          put_panel(!g.trans_a, t, va, as[cur ^ 1u]);
          put_panel(g.trans_b, t, vb, bs[cur ^ 1u]);
        }
        sync_threads();
      }
      for (unsigned r = 0; r < kThreadM; ++r) {
        const std::int64_t i = i0 + tm * kThreadM + r;
        for (unsigned c = 0; c < kThreadN; ++c) {
          const std::int64_t j = j0 + tn * kThreadN + c;
          if (full_mn || (i < g.m && j < g.n)) store_c(g, i, j, acc[r][c]);
        }
      }
    }
  }
}

}  // namespace TANDEM_GPU_ABI
}  // namespace tandem::gpu::kernels
