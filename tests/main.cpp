// doctest main for tandem's test executables. Strips --tandem-backend=NAME (see support.hpp) and
// --tandem-adversary (TANDEM_SIM_ADVERSARY=1 for this program),
// prints the seed so a failing run can be replayed with TANDEM_TEST_SEED.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../cli/watchdog.hpp"
#include "support.hpp"
#include "tandem/verify.hpp"

namespace tandem::test {
namespace {
std::string g_backend = "reference";
}
const std::string& backend_under_test() { return g_backend; }
std::uint64_t seed() {
  static const std::uint64_t value = [] {
    const std::uint64_t s = verify::seed_from_environment();
    // On standard error: doctest_discover_tests reads test names from standard output, and took
    // this line for a test (one that ran no test case, and was named anew by every seed).
    std::fprintf(stderr, "tandem tests: seed %llu (replay with TANDEM_TEST_SEED=%llu)\n",
                 static_cast<unsigned long long>(s), static_cast<unsigned long long>(s));
    return s;
  }();
  return value;
}
std::string widest_isa() {
#if defined(__x86_64__) || defined(__i386__)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")) return "avx512";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
#endif
  return "generic";
}
int isa_rank(const std::string& isa) { return isa == "avx512" ? 2 : isa == "avx2" ? 1 : 0; }

// A test case, or a case of the matrix inside one, that runs past TANDEM_CASE_TIMEOUT (default
// 1200 s, under CTest's 1500) is named and ends the program (exit 1): a GPU kernel that hangs
// becomes a failure with a name instead of a CTest timeout.
namespace {
cli::CaseWatchdog* g_watchdog = nullptr;
}
void watch_case(const std::string& name) {
  if (g_watchdog != nullptr) g_watchdog->start(g_backend + ": " + name);
}

namespace {
struct WatchListener : doctest::IReporter {
  explicit WatchListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& tc) override { watch_case(tc.m_name); }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {
    if (g_watchdog != nullptr) g_watchdog->stop();
  }
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("tandem_case_watchdog", 1, WatchListener);
}  // namespace
}  // namespace tandem::test

int main(int argc, char** argv) {
  // The CPU tunings these tests measure (under a loaded ctest -j) go to the build tree, not to the
  // user's cache, where later programs would read them; a caller's TANDEM_CACHE_DIR wins.
  ::setenv("TANDEM_CACHE_DIR", TANDEM_TEST_CACHE_DIR, 0);
  std::vector<char*> args;
  const char* prefix = "--tandem-backend=";
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix, std::strlen(prefix)) == 0) {
      tandem::test::g_backend = argv[i] + std::strlen(prefix);
    } else if (std::strcmp(argv[i], "--tandem-adversary") == 0) {
      ::setenv("TANDEM_SIM_ADVERSARY", "1", 1);  // the simulator backends run under the adversary
    } else {
      args.push_back(argv[i]);
    }
  }
  // The simulator shuffles thread order from TANDEM_TEST_SEED: give it this run's seed so one
  // number replays both the data and the schedule.
  setenv("TANDEM_TEST_SEED", std::to_string(tandem::test::seed()).c_str(), 0);
  tandem::cli::CaseWatchdog watchdog(tandem::cli::CaseWatchdog::limit_from_environment(1200), "tandem tests", 1);
  tandem::test::g_watchdog = &watchdog;
  doctest::Context context(static_cast<int>(args.size()), args.data());
  const int rc = context.run();
  tandem::test::g_watchdog = nullptr;
  return rc;
}
