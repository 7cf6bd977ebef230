// The scan's in-cache pass compiled for AVX-512F (scan_avx512.cpp) and AVX2 (scan_avx2.cpp), for
// scan.inl to call where the CPU has it. Each scans whole blocks of 4 vectors from the start of x
// into out, adding `running` and leaving the last prefix in it, and returns how many elements it
// did (the rest is the caller's); meanwhile it sums what it can of ahead[0, ahead_n) into
// ahead_sum and moves ahead past it (scan_blocks.inl). With `streamed`, out must be aligned to the
// vector (64 or 32 bytes). `pf`: how far ahead, and into which cache, ahead's lines are asked for.
#pragma once

#include <cstdint>

namespace tandem::openmp {

// How far ahead, and into which cache, the scan asks for the lines of its next piece while it
// scans the cached one (scan_blocks.inl): on a 2-vCPU AMD EPYC (Zen 4) 4 KiB into L2 moved
// 94-96% of a copy's bytes where 2 KiB into L1 moved 83-86% (five alternations); the 2 KiB into
// L1 it had was measured on a Zen 2/3 EPYC; none at all (the hardware prefetchers alone) lost
// 15% there, and is a variant for CPUs where it may not. Calibrated with the stores, and like
// them used for inputs past the last-level cache (smaller ones take these defaults).
struct ScanPrefetch {
  int bytes = 2048;  // distance ahead of the reads, a multiple of 64; 0: no prefetch instructions
  bool l2 = false;   // into L2 (prefetcht1), else into L1 (prefetcht0)
};

std::int64_t scan_blocks_avx512(bool inclusive, const float* x, float* out, std::int64_t n, float& running,
                                bool streamed, ScanPrefetch pf, const float*& ahead, std::int64_t& ahead_n,
                                float& ahead_sum);
std::int64_t scan_blocks_avx512(bool inclusive, const double* x, double* out, std::int64_t n, double& running,
                                bool streamed, ScanPrefetch pf, const double*& ahead, std::int64_t& ahead_n,
                                double& ahead_sum);
std::int64_t scan_blocks_avx512(bool inclusive, const std::int32_t* x, std::int32_t* out, std::int64_t n,
                                std::uint32_t& running, bool streamed, ScanPrefetch pf, const std::int32_t*& ahead,
                                std::int64_t& ahead_n, std::uint32_t& ahead_sum);

std::int64_t scan_blocks_avx2(bool inclusive, const float* x, float* out, std::int64_t n, float& running, bool streamed,
                              ScanPrefetch pf, const float*& ahead, std::int64_t& ahead_n, float& ahead_sum);
std::int64_t scan_blocks_avx2(bool inclusive, const double* x, double* out, std::int64_t n, double& running,
                              bool streamed, ScanPrefetch pf, const double*& ahead, std::int64_t& ahead_n,
                              double& ahead_sum);
std::int64_t scan_blocks_avx2(bool inclusive, const std::int32_t* x, std::int32_t* out, std::int64_t n,
                              std::uint32_t& running, bool streamed, ScanPrefetch pf, const std::int32_t*& ahead,
                              std::int64_t& ahead_n, std::uint32_t& ahead_sum);

}  // namespace tandem::openmp
