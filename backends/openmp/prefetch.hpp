// How far ahead, and into which cache, a memory-bound loop asks for the lines it will read: the
// scan's next piece (scan_blocks.inl) and the reductions' streams (reduce.inl). Each is chosen per
// CPU by the store calibration (tuning.cpp), as a software prefetch helped one CPU and cost
// another: on the 2-vCPU Xeon VM the reductions' 2 KiB into L2 took sum from ~91% to ~95% of the
// copy bandwidth; on the Zen 3 EPYC VM the same prefetch cost them ~10% against none.
#pragma once

namespace tandem::openmp {

struct ReadPrefetch {  // the defaults: the scan's table
  int bytes = 2048;    // distance ahead of the reads, a multiple of 64; 0: no prefetch instructions
  bool l2 = false;     // into L2 (prefetcht1), else into L1 (prefetcht0)
};

// The tables' choices, used without a calibration and for inputs that fit in the last-level cache.
// The scan's: on a 2-vCPU AMD EPYC (Zen 4) 4 KiB into L2 moved 94-96% of a copy's bytes where this
// 2 KiB into L1 (measured on a Zen 2/3 EPYC) moved 83-86% (five alternations); none at all lost
// 15% there. The reductions': 2 KiB into L2, measured on the Xeon.
constexpr ReadPrefetch kScanPrefetchTable{2048, false};
constexpr ReadPrefetch kReducePrefetchTable{2048, true};

}  // namespace tandem::openmp
