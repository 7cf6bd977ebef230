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

// What a launch needs besides the kernel and its arguments.
struct LaunchConfig {
  const char* kernel = "kernel";  // named in error messages
  Dim3 grid;
  Dim3 block;
  std::size_t dynamic_shared_bytes = 0;
};

}  // namespace tandem::gpu
