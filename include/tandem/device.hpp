// What a backend's device is: filled from the OS on CPUs and from the runtime on GPUs.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem {

enum class BackendKind { cpu, gpu, simulator };
std::string_view name_of(BackendKind kind);  // "cpu", "gpu", "simulator"

struct DeviceProperties {
  std::string name;  // "Intel(R) Xeon(R) ...", "NVIDIA H100 80GB HBM3"
  BackendKind kind = BackendKind::cpu;
  std::size_t memory_bytes = 0;             // total device (or host) memory
  int compute_units = 0;                    // CPU threads used, or GPU multiprocessors
  int simd_width = 0;                       // f32 lanes of the widest vector unit, or the warp width
  std::size_t shared_memory_per_block = 0;  // GPU only
  std::size_t l1_cache_bytes = 0;           // per core / per SM where known
  std::size_t l2_cache_bytes = 0;
  std::size_t l3_cache_bytes = 0;
  std::size_t shared_memory_per_multiprocessor = 0;  // GPU only
  int clock_mhz = 0;                                 // 0 where unknown
  int memory_clock_mhz = 0;                          // GPU: peak memory clock; 0 where unknown
  int memory_bus_width_bits = 0;                     // GPU: global memory bus width; 0 where unknown
  double memory_bandwidth_gbs = 0;        // theoretical peak where known (GPU: 2 x clock x bus width), else 0
  std::string compute_capability;         // GPU: "9.0" (CUDA), "gfx90a" (HIP); empty on CPUs
  std::vector<std::string> isa_features;  // "avx2", "avx512f", "sm_90", ...
  // The choices the backend made for this device, and where they come from (measured, cached,
  // a table, the environment): {"stores", "streaming, 2 interleaved runs per thread ..."}.
  std::vector<std::pair<std::string, std::string>> tuning;
};

}  // namespace tandem
