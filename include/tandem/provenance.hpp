// Which GPU kernel sources this library was built from, and how they compare with the last ones
// that ran on a GPU (bench/results/gpu-kernel-sources-*.json, written by ci/gpu.sh). `tandem info`
// prints it for the GPU backends; a kernel that waits on other blocks becomes a default only when
// its files equal those of a run whose check passed.
#pragma once

#include <string>
#include <vector>

namespace tandem {

struct KernelProvenance {
  struct HardwareRun {
    std::string device, driver, date, commit;
    std::string check;         // what `tandem check` on that GPU said: "passed", or how it failed
    std::string sources_hash;  // the kernel sources it ran
    std::vector<std::string> changed;  // kernel files that differ from these sources (none: the same)
  };
  std::string sources_hash;  // include/tandem/gpu/*.hpp and backends/gpu/kernels/*.hpp, 16 hex digits
  std::vector<HardwareRun> runs;
  // The decoupled look-back scan's files equal those of a run whose check passed.
  bool lookback_verified = false;
  // The sources' hash, then per recorded run its device, date, commit and check, and which kernel
  // files changed since; last, whether the look-back is verified.
  std::string summary() const;
};

const KernelProvenance& gpu_kernel_provenance();

}  // namespace tandem
