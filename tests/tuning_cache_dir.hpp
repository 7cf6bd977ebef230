// For the test programs that watch the openmp tuning's cache files: a cache directory of their
// own, emptied and named in TANDEM_CACHE_DIR before tandem first reads it, and its file count.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <filesystem>

namespace tandem_test {

inline void use_empty_cache_dir(const std::filesystem::path& dir) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ::setenv("TANDEM_CACHE_DIR", dir.c_str(), 1);
}

// The files in dir whose names start with `kind` (all of them for "").
inline std::size_t cache_files(const std::filesystem::path& dir, const char* kind = "") {
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind(kind, 0) == 0) ++files;
  }
  return files;
}

}  // namespace tandem_test
