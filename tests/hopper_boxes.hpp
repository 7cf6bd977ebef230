// The TMA box cases that the simulator's model (test_sim_hopper.cpp) and an sm_90 GPU
// (test_hopper_cuda.cu) must both lay out as the hardware documents: the kernel that copies a box
// into shared memory and writes it out as it lies, the cases, and what each byte must be.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../backends/gpu/kernels/hopper.hpp"
#include "tandem/gpu/kernel_api.hpp"

namespace tandem::test::hopper {

struct alignas(1024) BoxTile {
  unsigned char bytes[8192];
};

// Thread 0 copies the box at (x, y) into shared memory; every thread waits for it, then the block
// writes the shared bytes out as they lie.
TANDEM_KERNEL void copy_box(TANDEM_GRID_CONSTANT const gpu::kernels::TensorMap map, std::int32_t x, std::int32_t y,
                            std::uint32_t bytes, unsigned char* out) {
  namespace k = gpu::kernels;
  TANDEM_SHARED(BoxTile, tile);
  TANDEM_SHARED(k::MBarrier, bar);
  const unsigned t = gpu::thread_rank();
  if (t == 0) {
    k::mbarrier_init(&bar, 1);
    k::fence_mbarrier_init();
  }
  gpu::sync_threads();
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

}  // namespace tandem::test::hopper
