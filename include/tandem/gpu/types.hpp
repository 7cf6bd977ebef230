// Types shared by GPU kernels, their launch helpers and the simulator.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tandem/detail/portability.hpp"

namespace tandem::gpu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};
using lane_mask = std::uint64_t;

// The widest warp (AMD wave64) and the narrowest (NVIDIA, AMD wave32): per-warp shared arrays
// hold block_threads / kMinWarpSize entries.
inline constexpr unsigned kMaxWarpSize = 64;
inline constexpr unsigned kMinWarpSize = 32;
inline constexpr unsigned kMaxBlockThreads = 1024;

// How a tensor-memory-access (TMA) copy lays a box's rows out in shared memory: as they are, or
// with the 16-byte chunks of each 128-byte line XOR-ed with the line's index (bits 7 and up of
// the shared address; CUDA's CU_TENSOR_MAP_SWIZZLE_32B/64B/128B), which spreads a column's chunks
// over the banks.
enum class Swizzle : unsigned char { none, bytes32, bytes64, bytes128 };

// Where byte `offset` of shared memory (from the start of the block's window) lies under swizzle
// s: its 16-byte chunk index (bits 4-6) XOR-ed with bits 7-9 (128B), 7-8 (64B) or 7 (32B).
TANDEM_HOST_DEVICE constexpr std::uint32_t swizzled(std::uint32_t offset, Swizzle s) {
  const std::uint32_t lines = s == Swizzle::bytes128 ? 7u : s == Swizzle::bytes64 ? 3u : s == Swizzle::bytes32 ? 1u : 0u;
  return offset ^ (((offset >> 7) & lines) << 4);
}

// What a launch needs besides the kernel and its arguments.
struct LaunchConfig {
  const char* kernel = "kernel";  // named in error messages
  Dim3 grid;
  Dim3 block;
  std::size_t dynamic_shared_bytes = 0;
  // Opts the kernel in to more dynamic shared memory than a block gets by default (48 KiB on
  // CUDA), up to the device's opt-in limit (cudaFuncAttributeMaxDynamicSharedMemorySize; the
  // simulator's 227 KiB). The library's hip runtime ignores it (AMD GPUs have no opt-in: 64 KiB).
  bool large_shared = false;
};

}  // namespace tandem::gpu
