// tandem check: the cross-backend verification pass over the whole algorithm set.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli.hpp"
#include "tandem/tandem.hpp"
#include "tandem/verify.hpp"

namespace tandem::cli {

namespace {

void print_row(const verify::CaseResult& r, bool show) {
  if (!show) return;
  char share[32];
  if (!r.error.empty() || !r.guard_failure.empty()) {
    std::snprintf(share, sizeof share, "-");
  } else {
    std::snprintf(share, sizeof share, "%.3g%%", r.comparison.worst_share * 100);
  }
  std::printf("%-24s %-10s %-17s %-5s %-28s %12s  %s\n", r.algorithm.c_str(), r.backend.c_str(), r.tier.c_str(),
              r.dtype.c_str(), r.size.c_str(), share, r.passed() ? "PASS" : "FAIL");
  if (!r.error.empty()) std::printf("    error: %s\n", r.error.c_str());
  if (!r.guard_failure.empty()) std::printf("    guard: %s\n", r.guard_failure.c_str());
  if (!r.comparison.ok()) std::printf("    %s\n", r.comparison.describe().c_str());
}

}  // namespace

int check_main(const std::vector<std::string>& args) {
  verify::CheckOptions options;
  std::string backend_name, family;
  bool failures_only = false;
  std::uint64_t seed = 0;
  bool seed_given = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= args.size()) throw InvalidArgument(std::string(flag) + " needs a value");
      return args[++i];
    };
    if (a == "--quick") {
      options.quick = true;
    } else if (a == "--non-finite") {
      options.non_finite = true;
    } else if (a == "--failures-only") {
      failures_only = true;
    } else if (a == "--backend") {
      backend_name = value("--backend");
    } else if (a == "--family") {
      family = value("--family");
    } else if (a == "--seed") {
      const std::string text = value("--seed");
      char* end = nullptr;
      seed = std::strtoull(text.c_str(), &end, 0);
      if (end == text.c_str() || *end != '\0') throw InvalidArgument("--seed '" + text + "' is not a number");
      seed_given = true;
    } else {
      std::fprintf(stderr, "tandem check: unknown option '%s' (see tandem --help)\n", a.c_str());
      return 2;
    }
  }
  if (!family.empty()) {
    bool known = false;
    for (const auto& f : verify::families()) known = known || f == family;
    if (!known) throw InvalidArgument("unknown family '" + family + "': use elementwise, matrix, matmul, reduce, scan or ml");
  }
  if (!seed_given) seed = verify::seed_from_environment();

  // Which backends: --backend, else TANDEM_BACKEND, else every one tandem knows (unavailable ones
  // are reported as SKIPPED with the reason).
  std::vector<Backend*> targets;
  std::vector<BackendInfo> skipped;
  const char* env = std::getenv("TANDEM_BACKEND");
  if (!backend_name.empty()) {
    targets.push_back(&get_backend(backend_name));
  } else if (env != nullptr && env[0] != '\0') {
    targets.push_back(&default_backend());
  } else {
    for (const auto& info : backends()) {
      if (info.available) {
        targets.push_back(&get_backend(info.name));
      } else {
        skipped.push_back(info);
      }
    }
  }
  Backend& reference = get_backend("reference");

  std::printf("tandem check: seed %llu (replay with --seed %llu)%s%s\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed), options.quick ? ", quick" : "",
              options.non_finite ? ", non-finite inputs" : "");
  std::printf("%-24s %-10s %-17s %-5s %-28s %12s  %s\n", "algorithm", "backend", "tier", "dtype", "size",
              "worst/bound", "result");
  int passed = 0, failed = 0;
  const auto start = std::chrono::steady_clock::now();
  for (Backend* be : targets) {
    for (const auto& c : verify::cases(*be, options)) {
      if (!family.empty() && c.family != family) continue;
      const verify::CaseResult r = verify::run_case(c, *be, reference, seed);
      r.passed() ? ++passed : ++failed;
      print_row(r, !failures_only || !r.passed());
    }
  }
  for (const auto& info : skipped) {
    std::printf("%-24s %-10s %-17s %-5s %-28s %12s  SKIPPED: %s\n", "*", info.name.c_str(), "-", "-", "-", "-",
                info.reason.c_str());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\n%d passed, %d failed, %zu skipped (backends) in %.1f s\n", passed, failed, skipped.size(), seconds);
  return failed == 0 ? 0 : 1;
}

}  // namespace tandem::cli
