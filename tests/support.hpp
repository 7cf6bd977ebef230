// Shared by the test executables: which backend the matrix runs on, and how a test says SKIPPED.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "tandem/errors.hpp"
#include "tandem/registry.hpp"

namespace tandem::test {

// The backend named by --tandem-backend=NAME (the matrix executable is registered once per backend).
const std::string& backend_under_test();
// The seed of this process's run: TANDEM_TEST_SEED or fresh, printed once.
std::uint64_t seed();
// The widest kernels of this CPU, which openmp runs without a TANDEM_CPU_ISA cap: "avx512" (AVX-512
// F and VL), "avx2" (with FMA) or "generic"; and an ISA's place in that order (generic 0).
std::string widest_isa();
int isa_rank(const std::string& isa);
// Names the case now running for the watchdog (main.cpp): past TANDEM_CASE_TIMEOUT it is reported
// as hung and the program ends. Test cases are named on their own; the matrix names each of its cases.
void watch_case(const std::string& name);

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
