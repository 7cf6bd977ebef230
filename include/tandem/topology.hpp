// The host CPU's caches and cores as Linux's sysfs describes them (never sysconf, whose cache
// sizes some virtual machines report wrongly: a 256 MiB L3 where sysfs says 32 MiB).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tandem {

struct CacheInfo {
  int level = 0;          // 1, 2, 3, ...
  std::string type;       // Data, Instruction or Unified
  std::size_t bytes = 0;  // one instance of this cache
  int shared_by = 0;      // logical CPUs that share one instance
};

struct CpuTopology {
  std::vector<CacheInfo> caches;  // of CPU 0, in sysfs order
  int logical_cpus = 0;           // online
  int cores = 0;                  // physical cores among the online CPUs (0: sysfs does not say)
  int packages = 0;               // sockets (0: sysfs does not say)
  // The data caches of CPU 0 by level, one instance each (0 where absent).
  std::size_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;
  std::string source;  // the sysfs directory read, or why nothing could be read
};

// Reads the topology from a sysfs CPU directory laid out as /sys/devices/system/cpu (tests pass
// a fake tree). Missing files leave their fields 0; malformed ones raise DataError naming the file.
CpuTopology read_cpu_topology(const std::string& sysfs_cpu_dir = "/sys/devices/system/cpu");

// This machine's topology, read once.
const CpuTopology& cpu_topology();

}  // namespace tandem
