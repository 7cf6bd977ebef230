// The tensor_core GEMM tier: f16 or bf16 A and B, f32 accumulation and C, built on the warp-wide
// matrix multiply-accumulate D (16 x 8) = A (16 x 16) * B (16 x 8) + C of NVIDIA's mma.sync
// (PTX mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32, sm_80 and newer).
//
// Each lane of a 32-lane warp holds a fragment of every operand, laid out as the PTX ISA defines
// ("Matrix Fragments for mma.m16n8k16 with floating point type"), with g = lane / 4, t = lane % 4:
//   A: 8 elements a0..a7, row g + 8 * ((i / 2) % 2), column 2t + (i % 2) + 8 * (i / 4);
//   B: 4 elements b0..b3, row (k) 2t + (i % 2) + 8 * (i / 2), column (n) g;
//   C, D: 4 floats c0..c3, row g + 8 * (i / 2), column 2t + (i % 2).
// Compiled by nvcc for sm_80 or newer, mma() is the instruction itself. Everywhere else (the
// simulator, older GPUs) it is the same operation computed from the same fragments with warp
// shuffles: each lane fetches the A and B elements of its outputs from the lanes that hold them.
// So the simulator runs this kernel's fragment loads, tiling and epilogue exactly as a GPU does,
// and only the multiply-accumulate differs (the order of the additions within one mma).
//
// The kernel: 256 threads (8 warps, 2 x 4) compute a 128 x 128 tile of C; each warp a 64 x 32
// part as 4 x 4 mma tiles. The block walks k in slices of 32 through two shared-memory buffers of
// A (128 x 32, [m][k]) and B (stored 128 (n) x 32 (k)): while it multiplies one, each thread holds
// its part of the next slice in registers (16 bytes at once where a whole tile lies inside
// aligned matrices), then stores it into the other, one barrier per slice. Fragments are read
// from shared memory as 32-bit pairs. Zeros outside the matrices. Needs 32-lane warps (NVIDIA):
// the backend offers the tier only there.
#pragma once

#include "matmul.hpp"

namespace tandem::gpu::kernels {
inline namespace TANDEM_GPU_ABI {

inline constexpr unsigned kTensorBlockM = 128, kTensorBlockN = 128, kTensorK = 32, kTensorThreads = 256;
// The lanes mma.sync's fragments are laid out over: the tier runs only where a warp has this many
// (the backend checks), unlike the other kernels, which read gpu::warp_size().
inline constexpr unsigned kMmaLanes = 32;
// Each of the 8 warps (2 x 4) computes a kTensorWarpM x kTensorWarpN part of the block's tile.
inline constexpr unsigned kTensorWarpM = 64, kTensorWarpN = 32;
// Shared rows of 32 + 8 halves (80 bytes): 16-byte aligned, and a warp's fragment reads fall on
// 32 distinct banks.
inline constexpr unsigned kTensorRow = kTensorK + 8;

// Fragments as the instruction takes them: two 16-bit elements per 32-bit register, the lower
// index in the low half.
struct FragA {
  std::uint32_t r[4];
};
struct FragB {
  std::uint32_t r[2];
};

TANDEM_DEVICE std::uint16_t half_of(std::uint32_t reg, unsigned which) {
  return static_cast<std::uint16_t>(which == 0 ? reg & 0xffffu : reg >> 16);
}
TANDEM_DEVICE std::uint32_t pair(std::uint16_t lo, std::uint16_t hi) {
  return std::uint32_t(lo) | (std::uint32_t(hi) << 16);
}
template <class TA>
TANDEM_DEVICE float value_of(std::uint16_t bits) {
  if constexpr (std::is_same_v<TA, bfloat16>) {
    return bfloat16::to_float(bits);
  } else {
    return half::to_float(bits);
  }
}

// d += A * B over one 16 x 8 x 16 step, every lane of the warp taking part.
template <class TA>
TANDEM_DEVICE void mma(float (&d)[4], const FragA& a, const FragB& b) {
#if defined(TANDEM_GPU_COMPILER) && !defined(TANDEM_HIP) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<TA, bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
  }
#else
  // Lane (g, t) computes D[g + 8h][2t + j] for h, j in {0, 1}. A[r][k] is element
  // (k % 2) + 2 (r / 8) + 4 (k / 8) of lane 4 (r % 8) + (k % 8) / 2; B[k][n] is element
  // (k % 2) + 2 (k / 8) of lane 4 n + (k % 8) / 2. The register index depends on k alone, so
  // each exchange is one shuffle in which every lane sends the same register.
  const unsigned lane = lane_id(), g = lane / 4, t = lane % 4;
  for (unsigned k = 0; k < 16; ++k) {
    const unsigned from = (k % 8) / 2, which = k % 2;
    float av[2], bv[2];
    for (unsigned h = 0; h < 2; ++h) {
      const std::uint32_t reg = shfl(a.r[h + 2 * (k / 8)], 4 * g + from);
      av[h] = value_of<TA>(half_of(reg, which));
    }
    for (unsigned j = 0; j < 2; ++j) {
      const std::uint32_t reg = shfl(b.r[k / 8], 4 * (2 * t + j) + from);
      bv[j] = value_of<TA>(half_of(reg, which));
    }
    for (unsigned h = 0; h < 2; ++h) {
      for (unsigned j = 0; j < 2; ++j) d[2 * h + j] += av[h] * bv[j];
    }
  }
#endif
}

// 8 consecutive stored 16-bit elements: 16 bytes at once when `vector` (aligned), else one by one,
// zeros from index `valid` on.
struct Chunk {
  std::uint16_t h[8];
};
template <class TA>
TANDEM_DEVICE Chunk load_chunk(const TA* p, bool vector, std::int64_t valid) {
  Chunk c;
  if (vector && valid >= 8) {
    const Pack<std::uint16_t> v = load_pack(reinterpret_cast<const std::uint16_t*>(p));
    for (unsigned e = 0; e < 8; ++e) c.h[e] = v.v[e];
  } else {
    for (unsigned e = 0; e < 8; ++e) c.h[e] = std::int64_t(e) < valid ? p[e].bits : std::uint16_t(0);
  }
  return c;
}
// Two adjacent 16-bit shared elements (the first at an even index) as one fragment register.
TANDEM_DEVICE std::uint32_t load_pair(const std::uint16_t* p) {
#if defined(TANDEM_GPU_COMPILER)
  return *reinterpret_cast<const std::uint32_t*>(p);
#else
  if (reinterpret_cast<std::uintptr_t>(p) % 4 != 0) sim::misaligned(p, 4, "load_pair");
  return pair(p[0], p[1]);
#endif
}

// One operand's 128 (outer) x 32 (k) slice as 512 chunks of 8 consecutive stored elements, 2 per
// thread. Where k is contiguous (A as is, B transposed), chunk c is outer c / 4, k (c % 4) * 8..:
// a warp reads 8 rows of 64 bytes and stores 16 bytes at a time. Otherwise c = 64 a + 32 b + 2 q + h
// is k q + 16 b, outer (h + 2 a) * 8..: a warp reads 16 rows of 32 bytes (whole sectors), and its
// 2-byte stores down the shared tile's rows fall on 8 banks, 2 words each (taking outer from
// (c % 16) * 8 put all 16 lanes of a k on one bank: 80-byte rows, 8 apart, are 640 bytes).
struct ChunkPlace {
  unsigned outer, depth;  // within the slice
};
TANDEM_DEVICE ChunkPlace chunk_place(unsigned c, bool k_contiguous) {
  constexpr unsigned lanes = kMmaLanes, half = kTensorK / 2;  // a warp's chunks; k in two halves
  static_assert(lanes == 2 * half, "a warp's chunks cover half the slice's k, 2 lanes per row");
  if (k_contiguous) return {c / 4, (c % 4) * 8};
  return {((c % 2) + 2 * (c / (2 * lanes))) * 8, (c % lanes) / 2 + half * ((c / lanes) % 2)};
}
template <class TA>
struct TensorSlice {
  Chunk chunk[2];
  TANDEM_DEVICE void load(const TA* base, std::int64_t ld, bool k_contiguous, std::int64_t o0, std::int64_t outer_n,
                          std::int64_t p0, std::int64_t k, bool vector) {
    for (unsigned u = 0; u < 2; ++u) {
      const ChunkPlace at = chunk_place(thread_rank() + u * kTensorThreads, k_contiguous);
      const std::int64_t outer = o0 + at.outer, depth = p0 + at.depth;
      // elements of the run inside the matrix: the run goes along k, or along outer
      std::int64_t valid = 0;
      if (k_contiguous && outer < outer_n) valid = k - depth;
      if (!k_contiguous && depth < k) valid = outer_n - outer;
      const std::int64_t slow = k_contiguous ? outer : depth, fast = k_contiguous ? depth : outer;
      chunk[u] = valid > 0 ? load_chunk(base + slow * ld + fast, vector, valid) : Chunk{};
    }
  }
  // Into the shared tile [outer][kTensorRow].
  TANDEM_DEVICE void store(bool k_contiguous, std::uint16_t (*tile)[kTensorRow]) const {
    for (unsigned u = 0; u < 2; ++u) {
      const ChunkPlace at = chunk_place(thread_rank() + u * kTensorThreads, k_contiguous);
      for (unsigned e = 0; e < 8; ++e) {
        if (k_contiguous) {
          tile[at.outer][at.depth + e] = chunk[u].h[e];
        } else {
          tile[at.outer + e][at.depth] = chunk[u].h[e];
        }
      }
    }
  }
};

// [buffer][row][k] of A and [buffer][n][k] of B; 16-byte aligned, as the 32-bit fragment reads
// need 4 bytes.
struct alignas(16) TensorTiles {
  std::uint16_t a[2][kTensorBlockM][kTensorRow];
  std::uint16_t b[2][kTensorBlockN][kTensorRow];
};

template <class TA>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void matmul_tensor_core_kernel(Gemm<TA, float> g) {
  TANDEM_SHARED(TensorTiles, tiles);
  auto& as = tiles.a;
  auto& bs = tiles.b;
  const unsigned lane = lane_id(), warp = warp_id();
  const unsigned lg = lane / 4, lt = lane % 4;
  const unsigned wm = (warp / 4) * kTensorWarpM, wn = (warp % 4) * kTensorWarpN;  // this warp's part
  const bool a_k_contiguous = !g.trans_a, b_k_contiguous = g.trans_b;
  const std::int64_t tiles_m = (g.m + kTensorBlockM - 1) / kTensorBlockM;
  const std::int64_t tiles_n = (g.n + kTensorBlockN - 1) / kTensorBlockN;
  const std::int64_t slices = (g.k + kTensorK - 1) / kTensorK;
  for (std::int64_t bi = block_idx().y; bi < tiles_m; bi += grid_dim().y) {
    for (std::int64_t bj = block_idx().x; bj < tiles_n; bj += grid_dim().x) {
      const std::int64_t i0 = bi * kTensorBlockM, j0 = bj * kTensorBlockN;
      float acc[4][4][4] = {};
      TensorSlice<TA> na, nb;  // the next slice, in registers
      if (slices > 0) {
        na.load(g.a, g.lda, a_k_contiguous, i0, g.m, 0, g.k, g.vector_a);
        nb.load(g.b, g.ldb, b_k_contiguous, j0, g.n, 0, g.k, g.vector_b);
        na.store(a_k_contiguous, as[0]);
        nb.store(b_k_contiguous, bs[0]);
      }
      sync_threads();
      for (std::int64_t s = 0; s < slices; ++s) {
        const unsigned cur = static_cast<unsigned>(s & 1);
        const bool more = s + 1 < slices;
        if (more) {
          const std::int64_t p0 = (s + 1) * kTensorK;
          na.load(g.a, g.lda, a_k_contiguous, i0, g.m, p0, g.k, g.vector_a);
          nb.load(g.b, g.ldb, b_k_contiguous, j0, g.n, p0, g.k, g.vector_b);
        }
        for (unsigned kk = 0; kk < kTensorK; kk += 16) {
          FragA fa[4];
          FragB fb[4];
          for (unsigned mi = 0; mi < 4; ++mi) {
            const unsigned r = wm + mi * 16 + lg;
            for (unsigned q = 0; q < 4;
                 ++q) {  // registers a(2q), a(2q + 1): row r + 8 (q % 2), columns 2t.. + 8 (q / 2)
              fa[mi].r[q] = load_pair(&as[cur][r + 8 * (q % 2)][kk + 2 * lt + 8 * (q / 2)]);
            }
          }
          for (unsigned ni = 0; ni < 4; ++ni) {
            const unsigned n = wn + ni * 8 + lg;
            for (unsigned q = 0; q < 2; ++q) fb[ni].r[q] = load_pair(&bs[cur][n][kk + 2 * lt + 8 * q]);
          }
          for (unsigned mi = 0; mi < 4; ++mi) {
            for (unsigned ni = 0; ni < 4; ++ni) mma<TA>(acc[mi][ni], fa[mi], fb[ni]);
          }
        }
        if (more) {
          na.store(a_k_contiguous, as[cur ^ 1u]);
          nb.store(b_k_contiguous, bs[cur ^ 1u]);
        }
        sync_threads();
      }
      TANDEM_UNROLL
      for (unsigned mi = 0; mi < 4; ++mi) {
        TANDEM_UNROLL
        for (unsigned ni = 0; ni < 4; ++ni) {
          TANDEM_UNROLL
          for (unsigned e = 0; e < 4; ++e) {
            const std::int64_t i = i0 + wm + mi * 16 + lg + 8 * (e / 2);
            const std::int64_t j = j0 + wn + ni * 8 + 2 * lt + (e % 2);
            if (i < g.m && j < g.n) store_c(g, i, j, acc[mi][ni][e]);
          }
        }
      }
    }
  }
}

}  // namespace TANDEM_GPU_ABI
}  // namespace tandem::gpu::kernels
