// What the benchmarks share: the median of repeated timings after a warm-up.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tandem/detail/timing.hpp"

namespace tandem::bench {

// Seconds per call of f: the median of at least `reps` timed calls after one untimed warm-up call
// (page faults, caches, thread pools), repeated until they took 50 ms (at most 1000 calls): with
// three calls of a 0.1 ms op, one stall of the VM (an openmp add of 1 MiB once measured 23.6 ms
// in tandem_bench_sim, against 0.13-0.15 in four later runs) could set the median. The
// benchmarks also print how much CPU time the hypervisor took during the run (stolen_percent).
inline double median_seconds(int reps, const std::function<void()>& f) {
  f();
  return 1e-3 * detail::repeat_median([&] { return detail::host_ms(f); }, reps, std::max(reps, 1000), 50).median_ms;
}

// CPU time so far, from Linux's /proc/stat (all CPUs, in clock ticks): all of it, and what the
// hypervisor gave to other guests ("steal"). `known` is false where there is no such file.
struct CpuTicks {
  unsigned long long total = 0, steal = 0;
  bool known = false;
};
inline CpuTicks cpu_ticks() {
  CpuTicks t;
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (f == nullptr) return t;
  char label[8] = {};
  unsigned long long v[8] = {};  // user nice system idle iowait irq softirq steal
  if (std::fscanf(f, "%7s %llu %llu %llu %llu %llu %llu %llu %llu", label, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                  &v[6], &v[7]) == 9 &&
      std::strcmp(label, "cpu") == 0) {
    for (const unsigned long long x : v) t.total += x;
    t.steal = v[7];
    t.known = true;
  }
  std::fclose(f);
  return t;
}
// The share of CPU time stolen by the hypervisor between two readings, in percent (-1: not
// known): a benchmark on a VM says beside its numbers whether its CPUs were taken away.
inline double stolen_percent(const CpuTicks& from, const CpuTicks& to) {
  if (!from.known || !to.known || to.total <= from.total) return -1;
  return 100.0 * double(to.steal - from.steal) / double(to.total - from.total);
}
inline std::string stolen_text(double percent) {
  if (percent < 0) return "CPU time stolen by a hypervisor: not known (no /proc/stat)";
  char text[96];
  std::snprintf(text, sizeof text, "CPU time stolen by the hypervisor during this run: %.1f%% (/proc/stat)", percent);
  return text;
}

// The options every benchmark takes: --quick (fewer, smaller runs) and --json FILE.
struct Options {
  bool quick = false;
  std::string json_path;
};
// Parses them; returns -1 to go on, else the exit code (0 after --help, 2 for a bad option),
// having printed `usage` to stderr.
inline int parse_options(int argc, char** argv, const char* usage, Options& o) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      o.json_path = argv[++i];
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      o.quick = true;
    } else {
      std::fputs(usage, stderr);
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  return -1;
}

// A row of a targets benchmark (tandem_bench_cpu, tandem_bench_gpu): a value, the peer's measured
// in the same run (0: none), and the least ratio value / peer wanted (0: none).
struct TargetRow {
  std::string group, name, unit;
  double value = 0, peer = 0;
  std::string peer_name;
  double target = 0;
  // The peer timed again in the same turns (0: not): the peer over itself, the spread that two
  // runs of the same code show on this machine, against which a ratio near 1 is read.
  double peer_again = 0;
  double ratio() const { return peer > 0 ? value / peer : 0; }
  double peer_self_ratio() const { return peer > 0 && peer_again > 0 ? peer_again / peer : 0; }
  // Whether the row has a target to judge; `judge` false (a simulator's run) judges none.
  bool judged(bool judge) const { return judge && target > 0 && peer > 0; }
  bool met() const { return ratio() >= target; }
};

// Prints the rows as a table, each judged row with its verdict, then the tally of targets (or
// that none are judged).
inline void print_targets(const std::vector<TargetRow>& rows, bool judge) {
  std::size_t width = 4;
  for (const auto& row : rows) width = std::max(width, row.name.size());
  const int w = static_cast<int>(width);
  std::printf("%-12s %-*s %9s %-8s %9s %-14s %7s  %s\n", "group", w, "what", "value", "unit", "peer", "(same run)",
              "ratio", "target");
  int met = 0, missed = 0;
  for (const auto& row : rows) {
    std::string verdict;
    if (row.judged(judge)) {
      (row.met() ? met : missed) += 1;
      char t[64];
      std::snprintf(t, sizeof t, ">= %.0f%%: %s", row.target * 100, row.met() ? "met" : "MISSED");
      verdict = t;
    }
    if (row.peer_self_ratio() > 0) {
      char self[64];
      std::snprintf(self, sizeof self, " (the peer again: %.1f%%)", row.peer_self_ratio() * 100);
      verdict += self;
    }
    if (row.peer > 0) {
      std::printf("%-12s %-*s %9.4g %-8s %9.4g %-14s %6.1f%%  %s\n", row.group.c_str(), w, row.name.c_str(), row.value,
                  row.unit.c_str(), row.peer, row.peer_name.c_str(), row.ratio() * 100, verdict.c_str());
    } else {
      std::printf("%-12s %-*s %9.4g %-8s\n", row.group.c_str(), w, row.name.c_str(), row.value, row.unit.c_str());
    }
  }
  if (judge) {
    std::printf("targets: %d met, %d missed\n", met, missed);
  } else {
    std::printf("targets: not judged on a simulator\n");
  }
}

// Writes {<header>, "results": [the rows]} to path (header: the JSON members before "results");
// false when the file cannot be written.
inline bool write_targets_json(const std::string& path, const std::string& header, const std::vector<TargetRow>& rows,
                               bool judge) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  std::fprintf(f, "{%s, \"results\": [", header.c_str());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    char again[64] = "";
    if (row.peer_self_ratio() > 0) {
      std::snprintf(again, sizeof again, ", \"peer_again_value\": %.3f", row.peer_again);
    }
    std::fprintf(f,
                 "%s\n  {\"group\": \"%s\", \"name\": \"%s\", \"unit\": \"%s\", \"value\": %.3f, \"peer\": \"%s\", "
                 "\"peer_value\": %.3f%s, \"ratio\": %.4f, \"target\": %.2f, \"met\": %s}",
                 i ? "," : "", row.group.c_str(), row.name.c_str(), row.unit.c_str(), row.value, row.peer_name.c_str(),
                 row.peer, again, row.ratio(), row.target, row.judged(judge) ? (row.met() ? "true" : "false") : "null");
  }
  std::fprintf(f, "\n]}\n");
  return std::fclose(f) == 0;
}

}  // namespace tandem::bench
