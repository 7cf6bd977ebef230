// The scan's in-cache pass compiled for AVX-512F (scan_avx512.cpp), for scan.inl to call where
// the CPU has it. Each scans whole blocks of 64 bytes x 4 from the start of x into out, adding
// `running` and leaving the last prefix in it, and returns how many elements it did (the rest is
// the caller's). With `streamed`, out must be 64-byte aligned.
#pragma once

#include <cstdint>

namespace tandem::openmp {

std::int64_t scan_blocks_avx512(bool inclusive, const float* x, float* out, std::int64_t n, float& running,
                                bool streamed);
std::int64_t scan_blocks_avx512(bool inclusive, const double* x, double* out, std::int64_t n, double& running,
                                bool streamed);
std::int64_t scan_blocks_avx512(bool inclusive, const std::int32_t* x, std::int32_t* out, std::int64_t n,
                                std::uint32_t& running, bool streamed);

}  // namespace tandem::openmp
