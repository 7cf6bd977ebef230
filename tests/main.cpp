// doctest main for tandem's test executables. Strips --tandem-backend=NAME (see support.hpp),
// prints the seed so a failing run can be replayed with TANDEM_TEST_SEED.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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
    } else {
      args.push_back(argv[i]);
    }
  }
  // The simulator shuffles thread order from TANDEM_TEST_SEED: give it this run's seed so one
  // number replays both the data and the schedule.
  setenv("TANDEM_TEST_SEED", std::to_string(tandem::test::seed()).c_str(), 0);
  doctest::Context context(static_cast<int>(args.size()), args.data());
  return context.run();
}
