// Shared by the ML tests (regression, MLP): the backend under test, or SKIPPED with the reason;
// the shipped data files.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "support.hpp"
#include "tandem/data.hpp"
#include "tandem/tandem.hpp"

namespace tandem::test {

#ifdef TANDEM_TEST_HAVE_ZLIB
inline constexpr bool kNoZlib = false;
#else
inline constexpr bool kNoZlib = true;  // the shipped data sets are gzip-compressed
#endif

// The shipped data set `name` (a .gz file in data/). Where tandem was built without zlib, the
// plain copy in TANDEM_TEST_DATA_DIR is read instead (ci/gpu.sh makes one with gunzip).
inline std::string data_file(const char* name) {
  const char* plain = std::getenv("TANDEM_TEST_DATA_DIR");
  if (plain == nullptr || plain[0] == '\0') return std::string(TANDEM_DATA_DIR) + "/" + name;
  std::string file = name;
  if (file.ends_with(".gz")) file.resize(file.size() - 3);
  return std::string(plain) + "/" + file;
}

// Whether the shipped data sets can be read here; prints SKIPPED with the reason when not.
inline bool shipped_data_or_skip() {
  const char* plain = std::getenv("TANDEM_TEST_DATA_DIR");
  if (!kNoZlib || (plain != nullptr && plain[0] != '\0')) return true;
  std::printf("SKIPPED: built without zlib, and no TANDEM_TEST_DATA_DIR with plain copies of data/*.gz\n");
  return false;
}

// For the tests of gzip itself.
inline bool zlib_or_skip() {
  if (!kNoZlib) return true;
  std::printf("SKIPPED: built without zlib (TANDEM_ENABLE_ZLIB)\n");
  return false;
}

}  // namespace tandem::test
