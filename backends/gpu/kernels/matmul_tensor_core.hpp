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
// The kernel: 128 threads (4 warps, 2 x 2) compute a 64 x 64 tile of C; each warp a 32 x 32 part
// as 2 x 4 mma tiles; the block walks k in steps of 16 through shared-memory tiles of A (64 x 16)
// and B (stored as 64 (n) x 16 (k)), zeros outside the matrices. Needs 32-lane warps (NVIDIA):
// the backend offers the tier only there.
#pragma once

#include "matmul.hpp"

namespace tandem::gpu::kernels {
inline namespace TANDEM_GPU_ABI {

inline constexpr unsigned kTensorBlockM = 64, kTensorBlockN = 64, kTensorK = 16, kTensorThreads = 128;
// The lanes mma.sync's fragments are laid out over: the tier runs only where a warp has this many
// (the backend checks), unlike the other kernels, which read gpu::warp_size().
inline constexpr unsigned kMmaLanes = 32;
// Each of the 4 warps computes a kTensorWarpM x kTensorWarpN part of the block's tile.
inline constexpr unsigned kTensorWarpM = 32, kTensorWarpN = 32;

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

// The stored bits of A[i][p] and B[p][j] (zero outside the matrices).
template <class TA>
TANDEM_DEVICE std::uint16_t bits_a(const Gemm<TA, float>& g, std::int64_t i, std::int64_t p) {
  if (i >= g.m || p >= g.k) return 0;
  return (g.trans_a ? g.a[p * g.lda + i] : g.a[i * g.lda + p]).bits;
}
template <class TA>
TANDEM_DEVICE std::uint16_t bits_b(const Gemm<TA, float>& g, std::int64_t p, std::int64_t j) {
  if (p >= g.k || j >= g.n) return 0;
  return (g.trans_b ? g.b[j * g.ldb + p] : g.b[p * g.ldb + j]).bits;
}

template <class TA>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(128) void matmul_tensor_core_kernel(Gemm<TA, float> g) {
  // [row][k] of A and [n][k] of B; 8 halves of padding keep a warp's fragment reads off one bank.
  TANDEM_SHARED(std::uint16_t, as, [kTensorBlockM][kTensorK + 8]);
  TANDEM_SHARED(std::uint16_t, bs, [kTensorBlockN][kTensorK + 8]);
  const unsigned tid = thread_rank(), lane = lane_id(), warp = warp_id();
  const unsigned lg = lane / 4, lt = lane % 4;
  const unsigned wm = (warp / 2) * kTensorWarpM, wn = (warp % 2) * kTensorWarpN;  // this warp's part
  const std::int64_t tiles_m = (g.m + kTensorBlockM - 1) / kTensorBlockM;
  const std::int64_t tiles_n = (g.n + kTensorBlockN - 1) / kTensorBlockN;
  for (std::int64_t bi = block_idx().y; bi < tiles_m; bi += grid_dim().y) {
    for (std::int64_t bj = block_idx().x; bj < tiles_n; bj += grid_dim().x) {
      const std::int64_t i0 = bi * kTensorBlockM, j0 = bj * kTensorBlockN;
      float acc[2][4][4] = {};
      for (std::int64_t p0 = 0; p0 < g.k; p0 += kTensorK) {
        // 64 x 16 elements of each operand, 8 per thread; consecutive threads walk the stored
        // rows' contiguous direction.
        for (unsigned e = tid; e < kTensorBlockM * kTensorK; e += kTensorThreads) {
          const unsigned r = g.trans_a ? e % kTensorBlockM : e / kTensorK;
          const unsigned c = g.trans_a ? e / kTensorBlockM : e % kTensorK;
          as[r][c] = bits_a(g, i0 + r, p0 + c);
          const unsigned n = g.trans_b ? e / kTensorK : e % kTensorBlockN;
          const unsigned k = g.trans_b ? e % kTensorK : e / kTensorBlockN;
          bs[n][k] = bits_b(g, p0 + k, j0 + n);
        }
        sync_threads();
        FragA fa[2];
        FragB fb[4];
        for (unsigned mi = 0; mi < 2; ++mi) {
          const unsigned r = wm + mi * 16 + lg;
          for (unsigned q = 0; q < 4; ++q) {  // registers a(2q), a(2q + 1): row r + 8 (q % 2), columns 2t.. + 8 (q / 2)
            const unsigned row = r + 8 * (q % 2), col = 2 * lt + 8 * (q / 2);
            fa[mi].r[q] = pair(as[row][col], as[row][col + 1]);
          }
        }
        for (unsigned ni = 0; ni < 4; ++ni) {
          const unsigned n = wn + ni * 8 + lg;
          for (unsigned q = 0; q < 2; ++q) fb[ni].r[q] = pair(bs[n][2 * lt + 8 * q], bs[n][2 * lt + 8 * q + 1]);
        }
        for (unsigned mi = 0; mi < 2; ++mi) {
          for (unsigned ni = 0; ni < 4; ++ni) mma<TA>(acc[mi][ni], fa[mi], fb[ni]);
        }
        sync_threads();
      }
      for (unsigned mi = 0; mi < 2; ++mi) {
        for (unsigned ni = 0; ni < 4; ++ni) {
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
