// tandem check: the cross-backend verification pass over the whole algorithm set, as a table, as
// JSON and as a JUnit report for CI systems.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "options.hpp"
#include "watchdog.hpp"
#include "tandem/tandem.hpp"
#include "tandem/verify.hpp"

namespace tandem::cli {
namespace {

// The slowest case of a full check takes seconds on a GPU and under a minute on the simulator.
constexpr double kDefaultCaseTimeout = 300;

struct CheckArgs {
  verify::CheckOptions options;
  std::vector<std::string> backends;
  std::string family, junit;
  bool failures_only = false;
  std::uint64_t seed = 0;
  CLI::Option* seed_option = nullptr;
  double case_timeout = 0;
  CLI::Option* case_timeout_option = nullptr;
  JsonOption json;
};

struct Row {
  verify::CaseResult result;
  std::string family;
  double seconds = 0;
};

std::string message_of(const verify::CaseResult& r) {
  if (!r.error.empty()) return "error: " + r.error;
  if (!r.guard_failure.empty()) return "guard: " + r.guard_failure;
  return r.comparison.ok() ? std::string() : r.comparison.describe();
}

void print_row(const verify::CaseResult& r) {
  char share[32];
  if (!r.error.empty() || !r.guard_failure.empty()) {
    std::snprintf(share, sizeof share, "-");
  } else {
    std::snprintf(share, sizeof share, "%.3g%%", r.comparison.worst_share * 100);
  }
  std::printf("%-24s %-10s %-17s %-5s %-28s %12s  %s\n", r.algorithm.c_str(), r.backend.c_str(), r.tier.c_str(),
              r.dtype.c_str(), r.size.c_str(), share, r.passed() ? "PASS" : "FAIL");
  if (!r.passed()) std::printf("    %s\n", message_of(r).c_str());
}

std::string xml_escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // XML 1.0 has no control characters but tab, newline and carriage return.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

// One <testsuite> per backend, one <testcase> per case; unavailable backends as skipped cases.
std::string junit(const std::vector<Row>& rows, const std::vector<BackendInfo>& skipped, double seconds,
                  std::uint64_t seed) {
  std::vector<std::string> order;
  for (const Row& r : rows) {
    if (std::find(order.begin(), order.end(), r.result.backend) == order.end()) order.push_back(r.result.backend);
  }
  std::size_t failures = 0;
  for (const Row& r : rows) failures += !r.result.passed();
  char head[256];
  std::snprintf(head, sizeof head,
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"tandem check\" tests=\"%zu\" "
                "failures=\"%zu\" skipped=\"%zu\" time=\"%.3f\">\n",
                rows.size() + skipped.size(), failures, skipped.size(), seconds);
  std::string out = head;
  // The seed in each suite's properties (an XML comment cannot hold the "--" of "--seed").
  const std::string properties =
      "    <properties><property name=\"seed\" value=\"" + std::to_string(seed) + "\"/></properties>\n";
  for (const std::string& backend : order) {
    std::size_t tests = 0, failed = 0;
    double time = 0;
    std::string cases;
    for (const Row& row : rows) {
      const verify::CaseResult& r = row.result;
      if (r.backend != backend) continue;
      ++tests;
      time += row.seconds;
      char t[32];
      std::snprintf(t, sizeof t, "%.6f", row.seconds);
      cases += "    <testcase classname=\"" + xml_escaped("tandem." + backend + "." + row.family) + "\" name=\"" +
               xml_escaped(r.algorithm + " " + r.tier + " " + r.dtype + " " + r.size) + "\" time=\"" + t + "\"";
      if (r.passed()) {
        cases += "/>\n";
      } else {
        ++failed;
        const std::string message = message_of(r);
        cases += ">\n      <failure message=\"" + xml_escaped(message) + "\">" + xml_escaped(message) +
                 "</failure>\n    </testcase>\n";
      }
    }
    char suite[256];
    std::snprintf(suite, sizeof suite, "  <testsuite name=\"%s\" tests=\"%zu\" failures=\"%zu\" time=\"%.3f\">\n",
                  xml_escaped(backend).c_str(), tests, failed, time);
    out += suite + properties + cases + "  </testsuite>\n";
  }
  for (const BackendInfo& info : skipped) {
    out += "  <testsuite name=\"" + xml_escaped(info.name) +
           "\" tests=\"1\" failures=\"0\" skipped=\"1\">\n    <testcase classname=\"tandem." + xml_escaped(info.name) +
           "\" name=\"backend\">\n      <skipped message=\"" + xml_escaped(info.reason) +
           "\"/>\n    </testcase>\n  </testsuite>\n";
  }
  return out + "</testsuites>\n";
}

Json rows_json(const std::vector<Row>& rows) {
  Json cases = Json::array();
  for (const Row& row : rows) {
    const verify::CaseResult& r = row.result;
    cases.push_back({{"family", row.family},
                     {"algorithm", r.algorithm},
                     {"backend", r.backend},
                     {"tier", r.tier},
                     {"dtype", r.dtype},
                     {"size", r.size},
                     {"passed", r.passed()},
                     {"worst_share", number(r.comparison.worst_share)},
                     {"elements", r.comparison.count},
                     {"failures", r.comparison.failures},
                     {"message", message_of(r)},
                     {"seconds", row.seconds}});
  }
  return cases;
}

int run_check(CheckArgs& a) {
  if (a.seed_option->count() == 0) a.seed = verify::seed_from_environment();
  // Which backends: --backend (repeatable), else TANDEM_BACKEND, else every one tandem knows
  // (unavailable ones are reported as SKIPPED with the reason).
  std::vector<Backend*> targets;
  std::vector<BackendInfo> skipped;
  if (!a.backends.empty()) {
    for (const std::string& name : a.backends) {
      Backend& be = get_backend(name);
      if (std::find(targets.begin(), targets.end(), &be) == targets.end()) targets.push_back(&be);
    }
  } else if (env::text("TANDEM_BACKEND")) {
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
  const bool text = !a.json.to_stdout();
  if (text) {
    std::printf("tandem check: seed %llu (replay with --seed %llu)%s%s\n", static_cast<unsigned long long>(a.seed),
                static_cast<unsigned long long>(a.seed), a.options.quick ? ", quick" : "",
                a.options.non_finite ? ", non-finite inputs" : "");
    std::printf("%-24s %-10s %-17s %-5s %-28s %12s  %s\n", "algorithm", "backend", "tier", "dtype", "size",
                "worst/bound", "result");
  }
  std::vector<Row> rows;
  std::size_t failed = 0;
  // A case that hangs (a GPU kernel waiting for what never comes) is named, and the run ends (exit 1).
  CaseWatchdog watchdog(a.case_timeout_option->count() != 0 ? a.case_timeout
                                                             : CaseWatchdog::limit_from_environment(kDefaultCaseTimeout),
                        "tandem check", 1);
  const auto start = std::chrono::steady_clock::now();
  auto said = start;  // with the table off (JSON on standard output), a progress line every 2 s
  for (Backend* be : targets) {
    for (const auto& c : verify::cases(*be, a.options)) {
      if (!a.family.empty() && c.family != a.family) continue;
      const auto t0 = std::chrono::steady_clock::now();
      watchdog.start(c.algorithm + " " + be->name() + " " + c.tier + " " + c.dtype + " " + c.size +
                     " (seed " + std::to_string(a.seed) + ")");
      Row row{verify::run_case(c, *be, reference, a.seed), c.family, 0};
      watchdog.stop();
      row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      failed += !row.result.passed();
      if (text && (!a.failures_only || !row.result.passed())) {
        print_row(row.result);
        std::fflush(stdout);
      }
      rows.push_back(std::move(row));
      if (!text && std::chrono::steady_clock::now() - said > std::chrono::seconds(2)) {
        said = std::chrono::steady_clock::now();
        std::fprintf(stderr, "tandem check: %zu cases done (%zu failed), now on %s\n", rows.size(), failed,
                     be->name().c_str());
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (text) {
    for (const auto& info : skipped) {
      std::printf("%-24s %-10s %-17s %-5s %-28s %12s  SKIPPED: %s\n", "*", info.name.c_str(), "-", "-", "-", "-",
                  info.reason.c_str());
    }
    std::printf("\n%zu passed, %zu failed, %zu skipped (backends) in %.1f s\n", rows.size() - failed, failed,
                skipped.size(), seconds);
  }
  if (!a.junit.empty()) write_text(a.junit, junit(rows, skipped, seconds, a.seed));
  if (a.json.wanted()) {
    Json skipped_json = Json::array();
    for (const auto& info : skipped) skipped_json.push_back({{"backend", info.name}, {"reason", info.reason}});
    a.json.write(Json{{"command", "check"},
                      // A string: a 64-bit seed as a JSON number is rounded by jq and JavaScript (doubles).
                      {"seed", std::to_string(a.seed)},
                      {"quick", a.options.quick},
                      {"non_finite", a.options.non_finite},
                      {"passed", rows.size() - failed},
                      {"failed", failed},
                      {"seconds", seconds},
                      {"skipped", skipped_json},
                      {"cases", rows_json(rows)}});
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

Command add_check(CLI::App& app) {
  auto a = std::make_shared<CheckArgs>();
  CLI::App* sub = app.add_subcommand("check",
                                     "run every algorithm on a backend and compare it with the float64 reference; "
                                     "prints one row per case and exits 1 on any failure");
  sub->add_option("--backend", a->backends,
                  "backend to check (repeatable; default: TANDEM_BACKEND, else every available one, the others "
                  "reported as skipped)")
      ->type_name("NAME");
  sub->add_flag("--quick", a->options.quick, "fewer sizes (seconds instead of a minute)");
  sub->add_option("--family", a->family, "only one family")->check(CLI::IsMember(verify::families()));
  sub->add_flag("--non-finite", a->options.non_finite,
                "plant NaN and +-Inf in the inputs: results must propagate them alike");
  a->seed_option = sub->add_option("--seed", a->seed, "replay a run (the seed is printed; TANDEM_TEST_SEED works too)")
                       ->check(whole_number(0, UINT64_MAX));
  sub->add_flag("--failures-only", a->failures_only, "print only the rows that did not pass, and the summary");
  a->case_timeout_option =
      sub->add_option("--case-timeout", a->case_timeout,
                      "seconds one case may run before the check stops, naming it as hung, with exit 1 (default: "
                      "TANDEM_CASE_TIMEOUT, else " +
                          std::to_string(int(kDefaultCaseTimeout)) + "; 0: no limit)")
          ->check(CLI::Range(0.0, 86400.0))
          ->type_name("SECONDS");
  a->json.add(sub, "every case");
  output_file(sub, sub->add_option("--junit", a->junit, "a JUnit XML report for CI systems (one testsuite per backend)")
                       ->type_name("FILE"));
  return {sub, [a] { return run_check(*a); }};
}

}  // namespace tandem::cli
