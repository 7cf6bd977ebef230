// Shared by the ML tests (regression, MLP): the backend under test, or SKIPPED with the reason;
// the shipped data files.
#pragma once

#include <cstdio>
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

inline std::string data_file(const char* name) { return std::string(TANDEM_DATA_DIR) + "/" + name; }

// The backend under test, or nullptr after printing SKIPPED with the reason.
inline Backend* backend_or_skip() {
  try {
    return &get_backend(backend_under_test());
  } catch (const BackendUnavailable& e) {
    std::printf("SKIPPED: %s\n", e.what());
    return nullptr;
  }
}

}  // namespace tandem::test
