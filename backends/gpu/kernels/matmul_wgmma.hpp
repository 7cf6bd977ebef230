// The Hopper tensor_core kernel (sm_90a; opt-in until a GPU run measures it): bf16 or f16 A and B,
// f32 accumulation and C, fed by TMA copies through a pipeline of shared-memory stages and multiplied
// by wgmma (backends/gpu/kernels/hopper.hpp; the simulator runs it through its model of both).
//
// A block of 384 threads computes 128 x 128 or 128 x 256 tiles of C (WgmmaTile), persistent: the
// backend launches one block per multiprocessor, each taking every grid-th tile of an order that
// walks 16 tile rows at a time (wgmma_tile_at), the producer running on into its next tile's stages
// while the consumers write the last one out. Warpgroup 0 is the producer (its first thread issues
// the copies), warpgroups 1 and 2 the consumers, each 64 rows of the tile with one m64nNk16 wgmma
// per k16 (N the tile's width: 64 or 128 accumulators a thread). K runs in steps of 64 through 4
// stages, each holding A's 128 x 64 piece and B's 64 x BlockN in the 128-byte swizzle TMA boxes 64
// elements wide write. The wide tile asks a quarter fewer bytes of L2 per multiply-add (48 KiB per
// 2M against 32 KiB per 1M). Per stage: the producer waits for `empty` (both consumers done with
// its last use), expects the stage's bytes on `full` and issues the copies; a consumer waits for
// `full`, issues its four k16 steps as one wgmma group, and once the next group is issued and the
// previous one retired (wgmma_wait_group<1>), frees the previous stage: one arrival per warp on its
// `empty`. The copies fill zeros past the matrices' edges (K's tail adds nothing); the epilogue
// writes alpha * acc + beta * C from the registers, masked at the edges.
//
// Each operand comes as the product has it, rows 16-byte aligned: A as it is (K contiguous: one
// box of 128 rows per stage, K-major to wgmma) or transposed (A^T's rows, M contiguous: two boxes
// of 64 k rows, M-major, AMnMajor); B transposed (B^T's rows, K-major: one box of BlockN rows) or
// as it is (B's rows, N contiguous: BlockN / 64 boxes of 64 k rows, N-major, BMnMajor), which
// wgmma reads through its transpose bits. The backend checks the alignment.
#pragma once

#include "hopper.hpp"
#include "matmul.hpp"

namespace tandem::gpu::kernels {
inline namespace TANDEM_GPU_ABI {

// The block tile: 128 rows by BlockN (128 or 256) columns, K in steps of 64 through 4 stages.
template <unsigned BlockN>
struct WgmmaTile {
  static_assert(BlockN == 128 || BlockN == 256, "the wgmma kernel's tiles are 128 x 128 or 128 x 256");
  static constexpr unsigned block_m = 128, block_n = BlockN, block_k = 64, stages = 4;
  static constexpr unsigned threads = 3 * kWarpgroupThreads;  // a producer, two consumers
  // Registers a thread once the warpgroups have traded them (setmaxnreg): the producer needs few,
  // the consumers hold 64 or 128 accumulators; 40 + 2 x 232 = 504 = 3 x 168, the launch's share.
  static constexpr unsigned producer_registers = 40, consumer_registers = 232;
  // One stage: A's piece and B's, 128-byte swizzled rows (K-major: a row of 64 k per row of the
  // operand; M/N-major: 8 KiB boxes of 64 k rows, each 64 elements of M or N).
  struct alignas(1024) Stage {
    std::uint16_t a[block_m * block_k];
    std::uint16_t b[block_n * block_k];
  };
  static constexpr std::uint32_t box_bytes = 64 * 128;  // an M/N-major box
  struct Shared {
    Stage stage[stages];
    MBarrier full[stages], empty[stages];
  };
  // Dynamic shared memory to ask for: the stages start at the first multiple of 1024 in it.
  static constexpr std::size_t shared_bytes = sizeof(Shared) + 1024;
  // Tiles are walked in groups of this many tile rows, down each group's columns in turn, so that
  // the tiles in flight at once (one per multiprocessor: 132 on an H100) cover about 16 tile rows
  // by 8 tile columns rather than about 4 whole rows: a K step's pieces of A and B are then
  // shared by more of them in L2. At 8192^3 in 128 x 256 tiles (32 tile columns): 16 A pieces
  // (16 KiB each) and 9 B pieces (32 KiB) per 132 tiles, 0.53 MiB from memory, against 5 and 32
  // walking rows, 1.08 MiB. Arithmetic, not measured.
  static constexpr std::int64_t group_rows = 16;
};

// Tile `tile` of the grouped order (WgmmaTile::group_rows): its tile row and tile column.
template <class T>
TANDEM_DEVICE void wgmma_tile_at(std::int64_t tile, std::int64_t tiles_m, std::int64_t tiles_n, std::int64_t& bi,
                                 std::int64_t& bj) {
  const std::int64_t per_group = T::group_rows * tiles_n, first = tile / per_group * T::group_rows;
  const std::int64_t rows = tiles_m - first < T::group_rows ? tiles_m - first : T::group_rows;
  const std::int64_t in = tile % per_group;
  bi = first + in % rows;
  bj = in / rows;
}

// One block a multiprocessor (the launch bounds' second argument): the registers a thread gets at
// launch are then 65536 / 384 = 168 (a multiple of 8), which is what the setmaxnreg trade below
// (40 + 2 x 232 = 3 x 168) needs.
// clang-format off
template <class TA, unsigned BlockN, bool AMnMajor = false, bool BMnMajor = false>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(3 * kWarpgroupThreads, 1) void matmul_wgmma_kernel(
    TANDEM_GRID_CONSTANT const TensorMap a_map, TANDEM_GRID_CONSTANT const TensorMap b_map, Gemm<TA, float> g) {
  // clang-format on
  static_assert(std::is_same_v<TA, bfloat16> || std::is_same_v<TA, half>, "the wgmma kernel takes bf16 or f16");
  using T = WgmmaTile<BlockN>;
  TANDEM_DYNAMIC_SHARED(unsigned char, raw);
  const std::uint32_t window = shared_window(raw);
  auto& sh = *reinterpret_cast<typename T::Shared*>(raw + (1024 - window % 1024) % 1024);
  const unsigned t = thread_rank(), group = t / kWarpgroupThreads;
  const std::int64_t tiles_m = (g.m + T::block_m - 1) / T::block_m, tiles_n = (g.n + T::block_n - 1) / T::block_n;
  const unsigned steps = static_cast<unsigned>((g.k + T::block_k - 1) / T::block_k);
  constexpr unsigned consumer_warps = 2 * kWarpgroupWarps;
  if (t == 0) {
    for (unsigned s = 0; s < T::stages; ++s) {
      mbarrier_init(&sh.full[s], 1);
      mbarrier_init(&sh.empty[s], consumer_warps);
    }
    fence_mbarrier_init();
  }
  sync_threads();
  // The block's tiles: the grid holds a block per multiprocessor (or fewer, never more than the
  // tiles), each walking every grid-th tile of the grouped order; the producer and the consumers
  // walk the same ones, and `it` counts the steps (stage fills) both have passed.
  const std::int64_t tiles = tiles_m * tiles_n, blocks = std::int64_t(grid_dim().x) * grid_dim().y;
  const std::int64_t first = std::int64_t(block_idx().y) * grid_dim().x + block_idx().x;
  std::uint32_t it = 0;
  if (group == 0) {
    warpgroup_registers<RegisterTrade::lower, T::producer_registers>();
    if (t != 0) return;
    constexpr std::uint32_t bytes = (T::block_m + T::block_n) * T::block_k * 2;
    for (std::int64_t tile = first; tile < tiles; tile += blocks) {
      std::int64_t bi, bj;
      wgmma_tile_at<T>(tile, tiles_m, tiles_n, bi, bj);
      for (unsigned kt = 0; kt < steps; ++kt, ++it) {
        const unsigned s = it % T::stages, phase = (it / T::stages) % 2;
        mbarrier_wait_parity(&sh.empty[s], phase ^ 1u);
        mbarrier_arrive_expect_tx(&sh.full[s], bytes);
        const auto k0 = static_cast<std::int32_t>(kt * T::block_k);
        const auto m0 = static_cast<std::int32_t>(bi * T::block_m), n0 = static_cast<std::int32_t>(bj * T::block_n);
        auto* a = reinterpret_cast<unsigned char*>(sh.stage[s].a);
        auto* b = reinterpret_cast<unsigned char*>(sh.stage[s].b);
        if constexpr (AMnMajor) {
          for (unsigned c = 0; c < T::block_m / 64; ++c)
            tma_load_2d(a + c * T::box_bytes, &a_map, m0 + std::int32_t(64 * c), k0, &sh.full[s]);
        } else {
          tma_load_2d(a, &a_map, k0, m0, &sh.full[s]);
        }
        if constexpr (BMnMajor) {
          for (unsigned c = 0; c < T::block_n / 64; ++c)
            tma_load_2d(b + c * T::box_bytes, &b_map, n0 + std::int32_t(64 * c), k0, &sh.full[s]);
        } else {
          tma_load_2d(b, &b_map, k0, n0, &sh.full[s]);
        }
      }
    }
    return;
  }
  // A consumer: rows [row0, row0 + 64) of each tile, all BlockN columns in d.
  warpgroup_registers<RegisterTrade::raise, T::consumer_registers>();
  const unsigned row0 = (group - 1) * 64, lane = lane_id(), warp = warp_id() % kWarpgroupWarps;
  const auto release = [&](std::uint32_t step) {  // frees the stage of that step
    sync_warp();
    if (lane == 0) mbarrier_arrive(&sh.empty[step % T::stages]);
  };
  for (std::int64_t tile = first; tile < tiles; tile += blocks) {
    std::int64_t bi, bj;
    wgmma_tile_at<T>(tile, tiles_m, tiles_n, bi, bj);
    float d[BlockN / 2] = {};
    for (unsigned kt = 0; kt < steps; ++kt, ++it) {
      const unsigned s = it % T::stages, phase = (it / T::stages) % 2;
      mbarrier_wait_parity(&sh.full[s], phase);
      wgmma_fence_operands(d);
      wgmma_fence();
      const auto* a = reinterpret_cast<const unsigned char*>(sh.stage[s].a);
      const auto* b = reinterpret_cast<const unsigned char*>(sh.stage[s].b);
      TANDEM_UNROLL  // d stays in registers only where every index is a constant
          for (unsigned k16 = 0; k16 < T::block_k / 16; ++k16) {
        // 128-byte rows, 8-row groups 1024 bytes apart. K-major: the consumer's rows start
        // row0 rows in, a k16 step is 32 bytes into the row. M/N-major: its 64 rows of A are the
        // box row0 / 64, B's boxes are `leading` apart; a k16 step is 16 rows on.
        const std::uint64_t da = AMnMajor ? wgmma_descriptor(a + (row0 / 64) * T::box_bytes + k16 * 2048,
                                                             Swizzle::bytes128, T::box_bytes, 1024)
                                          : wgmma_descriptor(a + row0 * 128 + k16 * 32, Swizzle::bytes128, 16, 1024);
        const std::uint64_t db = BMnMajor ? wgmma_descriptor(b + k16 * 2048, Swizzle::bytes128, T::box_bytes, 1024)
                                          : wgmma_descriptor(b + k16 * 32, Swizzle::bytes128, 16, 1024);
        // the tile's first step starts from 0
        wgmma_async<TA, BlockN, AMnMajor, BMnMajor>(d, da, db, kt > 0 || k16 > 0);
      }
      wgmma_commit_group();
      wgmma_wait_group<1>();  // the previous step's group has read its stage
      wgmma_fence_operands(d);
      if (kt > 0) release(it - 1);
    }
    wgmma_wait_group<0>();
    wgmma_fence_operands(d);
    if (steps > 0) release(it - 1);
    // Warp w of the warpgroup holds rows 16w + lane / 4 (+ 8), columns 8j + 2 (lane % 4) (+ 1).
    const std::int64_t m0 = bi * T::block_m, n0 = bj * T::block_n;
    TANDEM_UNROLL
    for (unsigned j = 0; j < BlockN / 8; ++j) {
      TANDEM_UNROLL
      for (unsigned v = 0; v < 4; ++v) {
        const std::int64_t i = m0 + row0 + 16 * warp + lane / 4 + 8 * (v / 2);
        const std::int64_t c = n0 + 8 * j + 2 * (lane % 4) + v % 2;
        if (i < g.m && c < g.n) store_c(g, i, c, d[4 * j + v]);
      }
    }
  }
}

}  // namespace TANDEM_GPU_ABI
}  // namespace tandem::gpu::kernels
