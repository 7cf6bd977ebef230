// What the simulator's Hopper model (test_sim_hopper.cpp) and an sm_90 GPU (test_hopper_cuda.cu)
// must both do as the hardware documents: TMA boxes (the kernel that copies a box into shared
// memory and writes it out as it lies, the cases, what each byte must be) and wgmma products (a
// 64 x 64 x 64 product from TMA-loaded tiles in each shared-memory layout, each operand K-major
// or M/N-major, against the host's).
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
  std::uint16_t a[kTile * kTile];  // A's piece as the TMA copies lay it out
  std::uint16_t b[kTile * kTile];  // B's likewise
};

enum class WgmmaBug : int { none, read_before_wait, wrong_swizzle, tile_reused_before_wait };

// How the product's operands lie: A K-major (A's rows) or M-major (A^T's rows), B K-major (B^T's
// rows) or N-major (B's rows); bit 0 and bit 1 of wgmma_product's `majors`.
inline constexpr int kMajorA = 1, kMajorB = 2;

// One m64n64k16 step of wgmma_product with its operands' majorness as template arguments.
template <bool TransA, bool TransB>
TANDEM_DEVICE void product_step(float (&d)[32], std::uint64_t da, std::uint64_t db, bool accumulate) {
  gpu::kernels::wgmma_async<bfloat16, kTile, TransA, TransB>(d, da, db, accumulate);
}

// One operand's descriptor at K step k0 (a multiple of 16) of a piece TMA-copied in boxes `span`
// bytes wide (the swizzle's span, 16 unswizzled), placed one after another: along K when K-major
// (a K step of 16 lies 32 bytes into its box's rows), along M/N when M/N-major (k0 rows on).
TANDEM_DEVICE std::uint64_t product_descriptor(const std::uint16_t* piece, gpu::Swizzle declared, gpu::Swizzle s,
                                               std::uint32_t span, bool mn_major, std::uint32_t k0) {
  const std::uint32_t kw = span / 2, box_bytes = kTile * span;
  const auto* base = reinterpret_cast<const unsigned char*>(piece);
  if (mn_major) {
    // Swizzled: k rows `span` bytes wide, 8-row groups 8 * span apart, the next run of M/N a box
    // on. Unswizzled: core matrices of 8 k rows by 16 bytes, 128 bytes apart along K, a box apart
    // along M/N.
    const bool none = s == gpu::Swizzle::none;
    return gpu::kernels::wgmma_descriptor(base + k0 * span, declared, none ? 128 : box_bytes,
                                          none ? box_bytes : 8 * span);
  }
  // Swizzled: 8-row groups 8 * span bytes apart; unswizzled: 8 x 16-byte core matrices, 128 bytes
  // apart along the rows and a box (1024 bytes) apart along K.
  const std::uint32_t leading = s == gpu::Swizzle::none ? box_bytes : 16;
  return gpu::kernels::wgmma_descriptor(base + (k0 / kw) * box_bytes + (k0 % kw) * 2, declared, leading, 8 * span);
}

// One warpgroup (128 threads) computes C (64 x 64, row-major) = A (64 x 64) * B from the tensors
// the maps cover (A or A^T, B^T or B as `majors` says), copied by TMA in boxes as wide as the
// swizzle's span (8 elements unswizzled) placed one after another along the contiguous dimension,
// then four m64n64k16 wgmmas over K.
TANDEM_KERNEL void wgmma_product(TANDEM_GRID_CONSTANT const gpu::kernels::TensorMap a_map,
                                 TANDEM_GRID_CONSTANT const gpu::kernels::TensorMap b_map, int swizzle, int majors,
                                 int bug, float* c) {
  namespace k = gpu::kernels;
  TANDEM_SHARED(ProductTiles, tiles);
  TANDEM_SHARED(k::MBarrier, bar);
  const auto s = static_cast<gpu::Swizzle>(swizzle);
  const auto how = static_cast<WgmmaBug>(bug);
  const std::uint32_t span = s == gpu::Swizzle::bytes128  ? 128
                             : s == gpu::Swizzle::bytes64 ? 64
                             : s == gpu::Swizzle::bytes32 ? 32
                                                          : 16;
  const std::uint32_t kw = span / 2, box_bytes = kTile * span;  // elements per box row; bytes per box
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
  const gpu::Swizzle declared = how == WgmmaBug::wrong_swizzle ? gpu::Swizzle::none : s;
  const bool mn_a = (majors & kMajorA) != 0, mn_b = (majors & kMajorB) != 0;
  float d[32] = {};
  k::wgmma_fence_operands(d);
  k::wgmma_fence();
  for (std::uint32_t k0 = 0; k0 < kTile; k0 += 16) {
    const auto da = product_descriptor(tiles.a, declared, s, span, mn_a, k0);
    const auto db = product_descriptor(tiles.b, declared, s, span, mn_b, k0);
    if (mn_a) {
      mn_b ? product_step<true, true>(d, da, db, k0 > 0) : product_step<true, false>(d, da, db, k0 > 0);
    } else {
      mn_b ? product_step<false, true>(d, da, db, k0 > 0) : product_step<false, false>(d, da, db, k0 > 0);
    }
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

// A (64 x 64) and B (64 x 64) in bf16 bits, each as it is and transposed, small integers so every
// sum is exact, and C = A * B on the host.
struct Product {
  std::vector<std::uint16_t> a, at, b, bt;
  std::vector<float> c;
  // What a map of the product's A (or B) covers: its rows when K-major, its transpose's else.
  const std::vector<std::uint16_t>& a_rows(int majors) const { return (majors & kMajorA) != 0 ? at : a; }
  const std::vector<std::uint16_t>& b_rows(int majors) const { return (majors & kMajorB) != 0 ? b : bt; }
};
inline std::uint16_t bf16_bits(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  return static_cast<std::uint16_t>(u >> 16);  // small integers: exact
}
inline Product product() {
  constexpr unsigned n = kTile;
  Product p;
  p.a.resize(n * n);
  p.at.resize(n * n);
  p.b.resize(n * n);
  p.bt.resize(n * n);
  p.c.assign(n * n, 0.0f);
  std::vector<float> a(n * n), bt(n * n);
  for (unsigned i = 0; i < n * n; ++i) {
    a[i] = float(int((i * 37 + 11) % 9) - 4);
    bt[i] = float(int((i * 53 + 5) % 7) - 3);
  }
  for (unsigned r = 0; r < n; ++r) {
    for (unsigned q = 0; q < n; ++q) {
      p.a[r * n + q] = p.at[q * n + r] = bf16_bits(a[r * n + q]);
      p.bt[r * n + q] = p.b[q * n + r] = bf16_bits(bt[r * n + q]);
    }
  }
  for (unsigned m = 0; m < n; ++m) {
    for (unsigned j = 0; j < n; ++j) {
      for (unsigned q = 0; q < n; ++q) p.c[m * n + j] += a[m * n + q] * bt[j * n + q];
    }
  }
  return p;
}

inline const gpu::Swizzle kLayouts[] = {gpu::Swizzle::bytes128, gpu::Swizzle::bytes64, gpu::Swizzle::bytes32,
                                        gpu::Swizzle::none};
// The box width (elements along the contiguous dimension) a layout's TMA copies use.
inline std::uint32_t box_width(gpu::Swizzle s) {
  return s == gpu::Swizzle::bytes128 ? 64 : s == gpu::Swizzle::bytes64 ? 32 : s == gpu::Swizzle::bytes32 ? 16 : 8;
}

}  // namespace tandem::test::hopper
