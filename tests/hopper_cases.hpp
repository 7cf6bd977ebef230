// What the simulator's Hopper model (test_sim_hopper.cpp) and an sm_90 GPU (test_hopper_cuda.cu)
// must both do as the hardware documents: TMA boxes (the kernel that copies a box into shared
// memory and writes it out as it lies, the cases, what each byte must be) and wgmma products (a
// 64 x 64 x 64 product from TMA-loaded tiles in each shared-memory layout, against the host's).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../backends/gpu/kernels/hopper.hpp"
#include "tandem/gpu/kernel_api.hpp"

namespace tandem::test::hopper {

struct alignas(1024) BoxTile {
  unsigned char bytes[8192];
};

// Thread 0 starts bar expecting one arrival (its own, with the copies' bytes) and fences the init
// for the TMA unit; then the block meets, so that every thread may wait on it.
TANDEM_DEVICE void start_barrier(gpu::kernels::MBarrier& bar) {
  if (gpu::thread_rank() == 0) {
    gpu::kernels::mbarrier_init(&bar, 1);
    gpu::kernels::fence_mbarrier_init();
  }
  gpu::sync_threads();
}

// Thread 0 copies the box at (x, y) into shared memory; every thread waits for it, then the block
// writes the shared bytes out as they lie.
TANDEM_KERNEL void copy_box(TANDEM_GRID_CONSTANT const gpu::kernels::TensorMap map, std::int32_t x, std::int32_t y,
                            std::uint32_t bytes, unsigned char* out) {
  namespace k = gpu::kernels;
  TANDEM_SHARED(BoxTile, tile);
  TANDEM_SHARED(k::MBarrier, bar);
  const unsigned t = gpu::thread_rank();
  start_barrier(bar);
  if (t == 0) {
    k::mbarrier_arrive_expect_tx(&bar, bytes);
    k::tma_load_2d(tile.bytes, &map, x, y, &bar);
  }
  k::mbarrier_wait_parity(&bar, 0);
  for (unsigned i = t; i < bytes; i += gpu::block_threads()) out[i] = tile.bytes[i];
}

// The source: 40 rows of 64 16-bit elements, rows 128 bytes apart, element (r, c) = r * 256 + c.
inline constexpr std::uint64_t kRows = 40, kCols = 64, kRowBytes = 128;
inline std::vector<std::uint16_t> numbered() {
  std::vector<std::uint16_t> m(kRows * kCols);
  for (std::uint64_t r = 0; r < kRows; ++r) {
    for (std::uint64_t c = 0; c < kCols; ++c) m[r * kCols + c] = static_cast<std::uint16_t>(r * 256 + c);
  }
  return m;
}

// A tensor map over the source (width elements of each row, height rows) and one box it copies.
struct BoxCase {
  gpu::Swizzle swizzle;
  std::uint64_t width, height;
  std::uint32_t box_width, box_height;
  std::int32_t x, y;
  std::uint32_t bytes() const { return box_width * box_height * 2; }
};

// Edges (a tensor narrower than its rows, boxes past each side) unswizzled; each swizzle with
// boxes as wide as its span, one of them past the bottom edge.
inline std::vector<BoxCase> box_cases() {
  using S = gpu::Swizzle;
  return {{S::none, 20, kRows, 16, 8, 0, 0},         {S::none, 20, kRows, 16, 8, 4, 3},
          {S::none, 20, kRows, 16, 8, 8, 36},        {S::none, 20, kRows, 16, 8, -3, -2},
          {S::bytes128, kCols, kRows, 64, 8, 0, 0},  {S::bytes128, kCols, kRows, 64, 16, 0, 32},
          {S::bytes64, kCols, kRows, 32, 16, 32, 5}, {S::bytes32, kCols, kRows, 16, 16, 16, 9}};
}

// "" when box (as 16-bit elements) is the case's box as the hardware lays it out: box row r at
// byte r * row, element c of it at byte 2c; then, swizzled, the 16-byte chunk j of each 128-byte
// line L at chunk j xor (L mod 8, 4 or 2 for 128, 64 or 32 bytes); zeros past the tensor's edges.
// Else the first element that differs.
inline std::string check_box(const BoxCase& b, const std::vector<std::uint16_t>& box) {
  const std::uint32_t lines = b.swizzle == gpu::Swizzle::bytes128  ? 8
                              : b.swizzle == gpu::Swizzle::bytes64 ? 4
                              : b.swizzle == gpu::Swizzle::bytes32 ? 2
                                                                   : 1;
  const std::uint32_t row = b.box_width * 2;
  for (std::uint32_t r = 0; r < b.box_height; ++r) {
    for (std::uint32_t c = 0; c < b.box_width; ++c) {
      const std::int64_t gx = std::int64_t(b.x) + c, gy = std::int64_t(b.y) + r;
      const bool in = gx >= 0 && gy >= 0 && std::uint64_t(gx) < b.width && std::uint64_t(gy) < b.height;
      const std::uint16_t want = in ? static_cast<std::uint16_t>(gy * 256 + gx) : 0;
      const std::uint32_t o = r * row + c * 2, line = o / 128, in_line = o % 128;
      const std::uint32_t lands = line * 128 + ((in_line / 16) ^ (line % lines)) * 16 + in_line % 16;
      if (box[lands / 2] != want) {
        return "box at (" + std::to_string(b.x) + ", " + std::to_string(b.y) + "), swizzle " +
               std::to_string(static_cast<int>(b.swizzle)) + ": element (" + std::to_string(r) + ", " +
               std::to_string(c) + ") should be " + std::to_string(want) + " at byte " + std::to_string(lands) +
               ", which holds " + std::to_string(box[lands / 2]);
      }
    }
  }
  return "";
}

// ---- wgmma ----

inline constexpr unsigned kTile = 64;  // M, N and K of the product

struct alignas(1024) ProductTiles {
  std::uint16_t a[kTile * kTile];  // A's rows (64 x 64, K-major) as the TMA copies lay them out
  std::uint16_t b[kTile * kTile];  // B^T's rows (N x K, K-major) likewise
};

enum class WgmmaBug : int { none, read_before_wait, wrong_swizzle, tile_reused_before_wait };

// One warpgroup (128 threads) computes C (64 x 64, row-major) = A (64 x 64) * B, from A and B^T
// (both K-major) copied by TMA in boxes kw elements wide (the swizzle's span, or 8 unswizzled)
// placed one after another along K, then four m64n64k16 wgmmas over K.
TANDEM_KERNEL void wgmma_product(TANDEM_GRID_CONSTANT const gpu::kernels::TensorMap a_map,
                                 TANDEM_GRID_CONSTANT const gpu::kernels::TensorMap b_map, int swizzle, int bug,
                                 float* c) {
  namespace k = gpu::kernels;
  TANDEM_SHARED(ProductTiles, tiles);
  TANDEM_SHARED(k::MBarrier, bar);
  const auto s = static_cast<gpu::Swizzle>(swizzle);
  const auto how = static_cast<WgmmaBug>(bug);
  const std::uint32_t span = s == gpu::Swizzle::bytes128  ? 128
                             : s == gpu::Swizzle::bytes64 ? 64
                             : s == gpu::Swizzle::bytes32 ? 32
                                                          : 16;
  const std::uint32_t kw = span / 2, box_bytes = kTile * span;  // elements along K per box; bytes per box
  const unsigned t = gpu::thread_rank();
  start_barrier(bar);
  if (t == 0) {
    k::mbarrier_arrive_expect_tx(&bar, 2 * kTile * kTile * 2);
    for (std::uint32_t q = 0; q < kTile / kw; ++q) {
      k::tma_load_2d(reinterpret_cast<unsigned char*>(tiles.a) + q * box_bytes, &a_map, std::int32_t(q * kw), 0, &bar);
      k::tma_load_2d(reinterpret_cast<unsigned char*>(tiles.b) + q * box_bytes, &b_map, std::int32_t(q * kw), 0, &bar);
    }
  }
  k::mbarrier_wait_parity(&bar, 0);
  // The descriptors' view: swizzled, the 16-wide K step lies 32 bytes on within its box, 8-row
  // groups 8 * span bytes apart; unswizzled, 8 x 16-byte core matrices, 128 bytes apart along the
  // rows and a box (1024 bytes) apart along K.
  const gpu::Swizzle declared = how == WgmmaBug::wrong_swizzle ? gpu::Swizzle::none : s;
  float d[32] = {};
  k::wgmma_fence_operands(d);
  k::wgmma_fence();
  for (std::uint32_t k0 = 0; k0 < kTile; k0 += 16) {
    const std::uint32_t at = (k0 / kw) * box_bytes + (k0 % kw) * 2;
    const std::uint32_t leading = s == gpu::Swizzle::none ? box_bytes : 16, stride = 8 * span;
    const auto da = k::wgmma_descriptor(reinterpret_cast<unsigned char*>(tiles.a) + at, declared, leading, stride);
    const auto db = k::wgmma_descriptor(reinterpret_cast<unsigned char*>(tiles.b) + at, declared, leading, stride);
    k::wgmma_bf16<64>(d, da, db, k0 > 0);
  }
  k::wgmma_commit_group();
  if (how == WgmmaBug::tile_reused_before_wait) {
    gpu::sync_threads();
    if (t == 0) {
      for (auto& e : tiles.a) e = 0;
    }
    gpu::sync_threads();
  }
  if (how != WgmmaBug::read_before_wait) k::wgmma_wait_group<0>();
  k::wgmma_fence_operands(d);
  // Warp w holds rows 16w + lane / 4 (+ 8), columns 8j + 2 (lane % 4) (+ 1).
  const unsigned warp = gpu::warp_id() % k::kWarpgroupWarps, lane = gpu::lane_id();
  TANDEM_UNROLL
  for (unsigned j = 0; j < kTile / 8; ++j) {
    TANDEM_UNROLL
    for (unsigned v = 0; v < 4; ++v) {
      const unsigned row = 16 * warp + lane / 4 + 8 * (v / 2), col = 8 * j + 2 * (lane % 4) + v % 2;
      c[row * kTile + col] = d[4 * j + v];
    }
  }
  if (how == WgmmaBug::read_before_wait) k::wgmma_wait_group<0>();
}

// A (64 x 64) and B^T (64 x 64) in bf16 bits, small integers so every sum is exact, and
// C = A * B on the host.
struct Product {
  std::vector<std::uint16_t> a, bt;
  std::vector<float> c;
};
inline std::uint16_t bf16_bits(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  return static_cast<std::uint16_t>(u >> 16);  // small integers: exact
}
inline Product product() {
  Product p;
  p.a.resize(kTile * kTile);
  p.bt.resize(kTile * kTile);
  p.c.assign(kTile * kTile, 0.0f);
  std::vector<float> a(kTile * kTile), bt(kTile * kTile);
  for (unsigned i = 0; i < kTile * kTile; ++i) {
    a[i] = float(int((i * 37 + 11) % 9) - 4);
    bt[i] = float(int((i * 53 + 5) % 7) - 3);
    p.a[i] = bf16_bits(a[i]);
    p.bt[i] = bf16_bits(bt[i]);
  }
  for (unsigned m = 0; m < kTile; ++m) {
    for (unsigned n = 0; n < kTile; ++n) {
      for (unsigned q = 0; q < kTile; ++q) p.c[m * kTile + n] += a[m * kTile + q] * bt[n * kTile + q];
    }
  }
  return p;
}

inline const gpu::Swizzle kLayouts[] = {gpu::Swizzle::bytes128, gpu::Swizzle::bytes64, gpu::Swizzle::bytes32,
                                        gpu::Swizzle::none};
// The box width (elements along K) a layout's TMA copies use.
inline std::uint32_t box_width(gpu::Swizzle s) {
  return s == gpu::Swizzle::bytes128 ? 64 : s == gpu::Swizzle::bytes64 ? 32 : s == gpu::Swizzle::bytes32 ? 16 : 8;
}

}  // namespace tandem::test::hopper
