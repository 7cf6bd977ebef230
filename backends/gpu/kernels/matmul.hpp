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

template <class TA, class TC> struct Gemm {
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

template <class TA, class TC> TANDEM_DEVICE TC load_a(const Gemm<TA, TC>& g, std::int64_t i, std::int64_t p) {
  return to_compute<TC>(g.trans_a ? g.a[p * g.lda + i] : g.a[i * g.lda + p]);
}
template <class TA, class TC> TANDEM_DEVICE TC load_b(const Gemm<TA, TC>& g, std::int64_t p, std::int64_t j) {
  return to_compute<TC>(g.trans_b ? g.b[j * g.ldb + p] : g.b[p * g.ldb + j]);
}
template <class TA, class TC> TANDEM_DEVICE void store_c(const Gemm<TA, TC>& g, std::int64_t i, std::int64_t j, TC acc) {
  TC& out = g.c[i * g.ldc + j];
  out = g.beta == TC(0) ? g.alpha * acc : g.alpha * acc + g.beta * out;
}

// ---- naive: one output per thread, block (16, 16) ----
template <class TA, class TC> TANDEM_KERNEL void matmul_naive_kernel(Gemm<TA, TC> g) {
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
template <class TA, class TC> TANDEM_KERNEL void matmul_tiled_kernel(Gemm<TA, TC> g) {
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
template <class TC, class TA> TANDEM_DEVICE void load4(const TA* p, bool vector, TC (&out)[4]) {
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

// The 4 values a thread loads of the A tile (rows i0.., depth p0..) and where they go in the
// k-major shared tile as[k][m]. Not transposed: thread t loads row t/4, depth (t%4)*4 + 0..3;
// transposed (A stored k x m): depth t/16, rows (t%16)*4 + 0..3. Both read 4 consecutive
// stored elements.
template <class TA, class TC>
TANDEM_DEVICE void fetch_a(const Gemm<TA, TC>& g, unsigned t, std::int64_t i0, std::int64_t p0, bool full,
                           TC (&v)[4]) {
  if (!g.trans_a) {
    const std::int64_t i = i0 + t / 4, p = p0 + (t % 4) * 4;
    if (full) return load4(g.a + i * g.lda + p, g.vector_a, v);
    for (unsigned e = 0; e < 4; ++e) v[e] = (i < g.m && p + e < g.k) ? to_compute<TC>(g.a[i * g.lda + p + e]) : TC(0);
  } else {
    const std::int64_t p = p0 + t / 16, i = i0 + (t % 16) * 4;
    if (full) return load4(g.a + p * g.lda + i, g.vector_a, v);
    for (unsigned e = 0; e < 4; ++e) v[e] = (p < g.k && i + e < g.m) ? to_compute<TC>(g.a[p * g.lda + i + e]) : TC(0);
  }
}
template <class TA, class TC, class Tile> TANDEM_DEVICE void put_a(const Gemm<TA, TC>& g, unsigned t, const TC (&v)[4], Tile& as) {
  if (!g.trans_a) {
    for (unsigned e = 0; e < 4; ++e) as[(t % 4) * 4 + e][t / 4] = v[e];
  } else {
    for (unsigned e = 0; e < 4; ++e) as[t / 16][(t % 16) * 4 + e] = v[e];
  }
}
// The same for B into bs[k][n]. Not transposed: depth t/16, columns (t%16)*4 + 0..3;
// transposed (B stored n x k): column t/4, depth (t%4)*4 + 0..3.
template <class TA, class TC>
TANDEM_DEVICE void fetch_b(const Gemm<TA, TC>& g, unsigned t, std::int64_t p0, std::int64_t j0, bool full,
                           TC (&v)[4]) {
  if (!g.trans_b) {
    const std::int64_t p = p0 + t / 16, j = j0 + (t % 16) * 4;
    if (full) return load4(g.b + p * g.ldb + j, g.vector_b, v);
    for (unsigned e = 0; e < 4; ++e) v[e] = (p < g.k && j + e < g.n) ? to_compute<TC>(g.b[p * g.ldb + j + e]) : TC(0);
  } else {
    const std::int64_t j = j0 + t / 4, p = p0 + (t % 4) * 4;
    if (full) return load4(g.b + j * g.ldb + p, g.vector_b, v);
    for (unsigned e = 0; e < 4; ++e) v[e] = (j < g.n && p + e < g.k) ? to_compute<TC>(g.b[j * g.ldb + p + e]) : TC(0);
  }
}
template <class TA, class TC, class Tile> TANDEM_DEVICE void put_b(const Gemm<TA, TC>& g, unsigned t, const TC (&v)[4], Tile& bs) {
  if (!g.trans_b) {
    for (unsigned e = 0; e < 4; ++e) bs[t / 16][(t % 16) * 4 + e] = v[e];
  } else {
    for (unsigned e = 0; e < 4; ++e) bs[(t % 4) * 4 + e][t / 4] = v[e];
  }
}

template <class TA, class TC> TANDEM_KERNEL void matmul_register_kernel(Gemm<TA, TC> g) {
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
        put_a(g, t, va, as[0]);
        put_b(g, t, vb, bs[0]);
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
          put_a(g, t, va, as[cur ^ 1u]);
          put_b(g, t, vb, bs[cur ^ 1u]);
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
