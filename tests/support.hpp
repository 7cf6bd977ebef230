// Shared by the test executables: which backend the matrix runs on, and how a test says SKIPPED.
#pragma once

#include <cstdint>
#include <string>

namespace tandem::test {

// The backend named by --tandem-backend=NAME (the matrix executable is registered once per backend).
const std::string& backend_under_test();
// The seed of this process's run: TANDEM_TEST_SEED or fresh, printed once.
std::uint64_t seed();

}  // namespace tandem::test
