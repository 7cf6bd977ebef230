#pragma once

#include <string>

#include "tandem/device.hpp"

namespace tandem::host {

// The CPU as the OS describes it: model, memory, caches, clock and ISA features.
// compute_units is the number of threads the backend will use.
DeviceProperties cpu_properties(int threads);

// /proc/cpuinfo's "vendor_id" (GenuineIntel, AuthenticAMD) and "model name"; "" where absent.
std::string cpu_vendor();
std::string cpu_model_name();

// Run-time ISA checks (the CPU this process runs on, not the compiler's target).
bool cpu_has_avx2_fma();
bool cpu_has_avx512f();
// AVX512-BF16 (vdpbf16ps) beside the AVX-512 that cpu_has_avx512f asks for.
bool cpu_has_avx512bf16();

}  // namespace tandem::host
