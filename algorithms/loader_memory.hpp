// What the data loaders throw when the host's memory runs out while they read or parse: the
// OutOfMemory every allocation in tandem throws, naming the file (never a bare std::bad_alloc).
#pragma once

#include <cstddef>
#include <string>

namespace tandem::data::loaders {

// held: the bytes read so far (0 when unknown).
[[noreturn]] void out_of_memory(const std::string& path, std::size_t held);

}  // namespace tandem::data::loaders
