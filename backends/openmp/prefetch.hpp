// How far ahead, and into which cache, a memory-bound loop asks for the lines it will read: the
// scan's next piece (scan_blocks.inl) and the reductions' streams (reduce.inl). Each is chosen per
// CPU by the store calibration (tuning.cpp), as the same software prefetch gains a few points of
// copy bandwidth on one CPU and costs another a tenth against none.
#pragma once

namespace tandem::openmp {

struct ReadPrefetch {  // the defaults: the scan's table
  int bytes = 2048;    // distance ahead of the reads, a multiple of 64; 0: no prefetch instructions
  bool l2 = false;     // into L2 (prefetcht1), else into L1 (prefetcht0)
};

// The tables' choices, used without a calibration and for inputs that fit in the last-level cache.
constexpr ReadPrefetch kScanPrefetchTable{2048, false};   // Zen 2/3 EPYC: 83-86% of copy (Zen 4 prefers l2:4096)
constexpr ReadPrefetch kReducePrefetchTable{2048, true};  // Xeon: sum ~91% -> ~95% of copy

}  // namespace tandem::openmp
