// The cross-backend test matrix: every verification case of a family on the backend under test
// (one CTest entry per backend x family), compared with the float64 reference. Written once;
// CMake registers it for each backend with --tandem-backend=NAME.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "support.hpp"
#include "tandem/tandem.hpp"
#include "tandem/verify.hpp"

namespace {

using namespace tandem;

// The backend under test, or nullptr after printing SKIPPED with the reason.
Backend* backend_or_skip() {
  try {
    return &get_backend(test::backend_under_test());
  } catch (const BackendUnavailable& e) {
    std::printf("SKIPPED: %s\n", e.what());
    return nullptr;
  }
}

void run_family(const std::string& family, bool non_finite) {
  Backend* be = backend_or_skip();
  if (be == nullptr) return;
  Backend& reference = get_backend("reference");
  verify::CheckOptions options;
  options.non_finite = non_finite;
  int ran = 0;
  double worst = 0;
  for (const auto& c : verify::cases(*be, options)) {
    if (c.family != family) continue;
    const verify::CaseResult r = verify::run_case(c, *be, reference, test::seed());
    ++ran;
    worst = std::max(worst, r.comparison.worst_share);
    INFO(c.algorithm, " ", c.tier, " ", c.dtype, " ", c.size, " on ", be->name());
    CHECK_MESSAGE(r.error.empty(), r.error);
    CHECK_MESSAGE(r.guard_failure.empty(), r.guard_failure);
    CHECK_MESSAGE(r.comparison.ok(), r.comparison.describe());
  }
  std::printf("%s on %s: %d cases, worst error %.3g%% of its bound\n", family.c_str(), be->name().c_str(), ran,
              worst * 100);
  CHECK(ran > 0);
}

}  // namespace

TEST_CASE("elementwise") { run_family("elementwise", false); }
TEST_CASE("matrix") { run_family("matrix", false); }
TEST_CASE("matmul") {
  // When a run caps the micro-kernel (TANDEM_CPU_ISA), check the cap took effect on openmp.
  const char* isa = std::getenv("TANDEM_CPU_ISA");
#if defined(__x86_64__) || defined(__i386__)
  const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  const bool has_avx2 = false;
#endif
  const bool cpu_can = isa == nullptr || std::string(isa) == "generic" || (std::string(isa) == "avx2" && has_avx2);
  if (isa != nullptr && cpu_can && test::backend_under_test() == "openmp") {
    bool found = false;
    for (const auto& f : get_backend("openmp").properties().isa_features) found = found || f == std::string("microkernel:") + isa;
    CHECK_MESSAGE(found, "TANDEM_CPU_ISA=", isa, " did not select that micro-kernel");
  }
  run_family("matmul", false);
}
TEST_CASE("reduce") { run_family("reduce", false); }
TEST_CASE("scan") { run_family("scan", false); }
TEST_CASE("ml") { run_family("ml", false); }
TEST_CASE("non_finite") {
  for (const auto& family : verify::families()) run_family(family, true);
}
