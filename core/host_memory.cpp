#include "host_memory.hpp"

#include <sys/sysinfo.h>

namespace tandem::host {

std::size_t physical_memory_bytes() {
  struct sysinfo info {};
  if (sysinfo(&info) != 0) return 0;
  return static_cast<std::size_t>(info.totalram) * info.mem_unit;
}

std::size_t available_memory_bytes() {
  struct sysinfo info {};
  if (sysinfo(&info) != 0) return 0;
  return static_cast<std::size_t>(info.freeram + info.bufferram) * info.mem_unit;
}

}  // namespace tandem::host
