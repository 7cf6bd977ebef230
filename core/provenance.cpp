// The GPU kernel sources' provenance, from the header cmake/TandemGpuSources.cmake generates.
#include "tandem/provenance.hpp"

#include <sstream>

namespace tandem {

const KernelProvenance& gpu_kernel_provenance() {
  static const KernelProvenance p = [] {
    KernelProvenance k;
#define TANDEM_GPU_RUN(device_, driver_, date_, commit_, check_, hash_, changed_)                  \
  {                                                                                              \
    KernelProvenance::HardwareRun run{device_, driver_, date_, commit_, check_, hash_, {}};      \
    std::istringstream files(changed_);                                                          \
    for (std::string f; std::getline(files >> std::ws, f, ',');) run.changed.push_back(f);       \
    k.runs.push_back(std::move(run));                                                            \
  }
#include "tandem_gpu_provenance.inc"
#undef TANDEM_GPU_RUN
    k.sources_hash = TANDEM_GPU_SOURCES_HASH;
    k.lookback_verified = TANDEM_GPU_LOOKBACK_VERIFIED;
    return k;
  }();
  return p;
}

std::string KernelProvenance::summary() const {
  std::string s = "kernel sources " + sources_hash;
  if (runs.empty()) return s + ": no run on a GPU recorded";
  for (const HardwareRun& r : runs) {
    s += "\n  " + r.device + " (" + r.date + ", " + r.commit + ", check " + r.check + "): ";
    if (r.changed.empty()) {
      s += "the same sources";
      continue;
    }
    s += "ran " + r.sources_hash + "; changed since:";
    for (std::size_t i = 0; i < r.changed.size(); ++i) s += (i == 0 ? " " : ", ") + r.changed[i];
  }
  s += lookback_verified ? "\n  decoupled look-back scan: verified on hardware, the default below 2^20 elements"
                         : "\n  decoupled look-back scan: not verified on hardware with these sources; the default is three_pass";
  return s;
}

}  // namespace tandem
