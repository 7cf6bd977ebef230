// The host's physical memory, from the OS: what host allocations are checked against and what
// their OutOfMemory errors report. Internal; the CPU backends use it too.
#pragma once

#include <cstddef>

namespace tandem::host {

// Total and available physical memory (bytes); 0 when the OS does not say.
std::size_t physical_memory_bytes();
std::size_t available_memory_bytes();

}  // namespace tandem::host
