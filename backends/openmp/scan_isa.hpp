// The scan's in-cache pass compiled for AVX-512F (vector_avx512.cpp) and AVX2 (vector_avx2.cpp), for
// scan.inl to call where the CPU has it. Each scans whole blocks of 4 vectors from the start of x
// into out, adding `running` and leaving the last prefix in it, and returns how many elements it
// did (the rest is the caller's); meanwhile it sums what it can of ahead[0, ahead_n) into
// ahead_sum and moves ahead past it (scan_blocks.inl). With `streamed`, out must be aligned to the
// vector (64 or 32 bytes). `pf`: how far ahead, and into which cache, ahead's lines are asked for.
#pragma once

#include <cstdint>

#include "prefetch.hpp"

namespace tandem::openmp {

std::int64_t scan_blocks_avx512(bool inclusive, const float* x, float* out, std::int64_t n, float& running,
                                bool streamed, ReadPrefetch pf, const float*& ahead, std::int64_t& ahead_n,
                                float& ahead_sum);
std::int64_t scan_blocks_avx512(bool inclusive, const double* x, double* out, std::int64_t n, double& running,
                                bool streamed, ReadPrefetch pf, const double*& ahead, std::int64_t& ahead_n,
                                double& ahead_sum);
std::int64_t scan_blocks_avx512(bool inclusive, const std::int32_t* x, std::int32_t* out, std::int64_t n,
                                std::uint32_t& running, bool streamed, ReadPrefetch pf, const std::int32_t*& ahead,
                                std::int64_t& ahead_n, std::uint32_t& ahead_sum);

std::int64_t scan_blocks_avx2(bool inclusive, const float* x, float* out, std::int64_t n, float& running, bool streamed,
                              ReadPrefetch pf, const float*& ahead, std::int64_t& ahead_n, float& ahead_sum);
std::int64_t scan_blocks_avx2(bool inclusive, const double* x, double* out, std::int64_t n, double& running,
                              bool streamed, ReadPrefetch pf, const double*& ahead, std::int64_t& ahead_n,
                              double& ahead_sum);
std::int64_t scan_blocks_avx2(bool inclusive, const std::int32_t* x, std::int32_t* out, std::int64_t n,
                              std::uint32_t& running, bool streamed, ReadPrefetch pf, const std::int32_t*& ahead,
                              std::int64_t& ahead_n, std::uint32_t& ahead_sum);

}  // namespace tandem::openmp
