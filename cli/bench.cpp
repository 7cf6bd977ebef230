// tandem bench: every algorithm x backend x tier/variant x size, kernel-only and end to end, with
// the limit measured in the same run. tandem compare: the speed-up of each backend over the CPU
// at each size and the size from which it wins end to end.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "args.hpp"
#include "cli.hpp"
#include "sweep.hpp"
#include "tandem/tandem.hpp"

namespace tandem::cli {
namespace {

struct Common {
  sweep::Options sweep;
  std::string json_path, csv_path, plot_dir, crossover_path;
};

// Parses the options both commands take; returns false (after printing) on an unknown one.
bool parse(const std::vector<std::string>& argv, const char* command, Common& c) {
  Args args(argv);
  while (args.next()) {
    const std::string& f = args.flag();
    if (f == "--full")
      c.sweep.full = true;
    else if (f == "--backend")
      c.sweep.backends.push_back(args.value());
    else if (f == "--algorithm")
      c.sweep.algorithms.push_back(args.value());
    else if (f == "--json")
      c.json_path = args.value();
    else if (f == "--csv")
      c.csv_path = args.value();
    else if (f == "--plot")
      c.plot_dir = args.value();
    else if (f == "--crossover" && std::string(command) == "compare")
      c.crossover_path = args.value();
    else if (f == "--min-time")
      c.sweep.min_seconds = args.real(1e-4, 10);
    else if (f == "--warm")
      c.sweep.flush = false;
    else {
      std::fprintf(stderr, "tandem %s: unknown option '%s' (see tandem --help)\n", command, f.c_str());
      return false;
    }
  }
  return true;
}

std::string size_text(const sweep::Result& r) {
  if (r.algorithm == "matmul") return std::to_string(r.size) + "^3";
  char buf[32];
  if (r.size >= (1u << 20)) {
    std::snprintf(buf, sizeof buf, "%zuM", r.size >> 20);
  } else if (r.size >= (1u << 10)) {
    std::snprintf(buf, sizeof buf, "%zuK", r.size >> 10);
  } else {
    std::snprintf(buf, sizeof buf, "%zu", r.size);
  }
  return buf;
}

void outputs(const Common& c, const std::vector<sweep::Result>& results, const std::string& command,
             const std::string& json_text) {
  if (!c.json_path.empty()) write_text(c.json_path, json_text);
  if (!c.csv_path.empty()) write_text(c.csv_path, sweep::csv(results));
  if (!c.plot_dir.empty()) {
    sweep::plot(results, c.plot_dir, command);
    std::printf("plots written to %s\n", c.plot_dir.c_str());
  }
}

// Backends tandem knows but cannot run here, with the reason (what a comparison is missing).
void print_missing() {
  for (const auto& info : backends()) {
    if (!info.available && (info.name == "cuda" || info.name == "hip")) {
      std::printf("  %s: %s\n", info.name.c_str(), info.reason.c_str());
    }
  }
}

}  // namespace

int bench_main(const std::vector<std::string>& argv) {
  if (!argv.empty() && (argv[0] == "bandwidth" || argv[0] == "memory")) {
    const std::vector<std::string> rest(argv.begin() + 1, argv.end());
    return argv[0] == "bandwidth" ? bench_bandwidth_main(rest) : bench_memory_main(rest);
  }
  Common c;
  c.sweep.variants = true;
  if (!parse(argv, "bench", c)) return 2;
  const bool quiet = c.json_path == "-" || c.csv_path == "-";
  if (!quiet) {
    std::printf(
        "tandem bench%s: kernel time is the median of repeats after a warm-up (events on GPUs); end to "
        "end is host data in, host result out\n",
        c.sweep.full ? " --full" : "");
    std::printf("%-7s %-9s %-17s %7s %11s %21s %11s %7s %11s %11s %11s %11s\n", "algo", "backend", "variant", "size",
                "kernel ms", "min-max ms", "rate", "share", "e2e pageable", "e2e pinned", "e2e overlap", "e2e managed");
  }
  const auto results = sweep::run(c.sweep, [&](const sweep::Result& r) {
    if (quiet) return;
    char rate[32], share[32], spread[48];
    if (r.flops > 0) {
      std::snprintf(rate, sizeof rate, "%.1f GF/s", r.gflops());
      if (r.vendor_gflops > 0) {
        std::snprintf(share, sizeof share, "%.0f%%v", 100 * r.gflops() / r.vendor_gflops);
      } else {
        std::snprintf(share, sizeof share, "-");
      }
    } else {
      std::snprintf(rate, sizeof rate, "%.1f GB/s", r.gbps());
      std::snprintf(share, sizeof share, "%.0f%%c", 100 * r.gbps() / r.limit_gbps);
    }
    std::snprintf(spread, sizeof spread, "%.4g-%.4g%s", r.kernel.min_ms, r.kernel.max_ms, r.flushed ? "" : " w");
    char overlap[24] = "-", managed[24] = "-";
    if (r.e2e_overlap_ms > 0) std::snprintf(overlap, sizeof overlap, "%.4g", r.e2e_overlap_ms);
    if (r.e2e_managed_ms > 0) std::snprintf(managed, sizeof managed, "%.4g", r.e2e_managed_ms);
    std::printf("%-7s %-9s %-17s %7s %11.4g %21s %11s %7s %11.4g %11.4g %11s %11s\n", r.algorithm.c_str(),
                r.backend.c_str(), r.variant.c_str(), size_text(r).c_str(), r.kernel.median_ms, spread, rate, share,
                r.e2e_pageable_ms, r.e2e_pinned_ms, overlap, managed);
    std::fflush(stdout);
  });
  if (!quiet) {
    std::printf(
        "share: %%c of the backend's own copy bandwidth at that size (bytes read + written), %%v of its "
        "vendor BLAS (OpenBLAS, cuBLAS) at that size\n"
        "kernel times start with the caches evicted where the data fits in them; w: warm (data larger than the "
        "caches, or --warm)\ne2e overlap: pinned, in chunks on two queues (add, axpy, sum, dot from 64K); e2e "
        "managed: through managed memory where the runtime has it; -: not measured\n");
  }
  outputs(c, results, "tandem bench", sweep::json(results, "tandem bench"));
  return 0;
}

int compare_main(const std::vector<std::string>& argv) {
  Common c;
  if (!parse(argv, "compare", c)) return 2;
  const auto results = sweep::run(c.sweep);
  // The CPU baseline: openmp when measured, else the first CPU backend.
  std::string baseline;
  std::vector<std::string> order;
  for (const auto& r : results) {
    if (std::find(order.begin(), order.end(), r.backend) == order.end()) order.push_back(r.backend);
    if (r.kind == "cpu" && (baseline.empty() || r.backend == "openmp")) baseline = r.backend;
  }
  if (baseline.empty()) throw InvalidArgument("tandem compare needs a CPU backend among --backend to compare with");
  std::map<std::tuple<std::string, std::string, std::size_t>, const sweep::Result*> at;
  for (const auto& r : results) at[{r.algorithm, r.backend, r.size}] = &r;

  struct Crossover {
    std::string algorithm, backend;
    std::size_t size = 0;  // 0: never in the measured range
    bool measured = false;
  };
  std::vector<Crossover> crossovers;
  const bool quiet = c.json_path == "-" || c.csv_path == "-";
  if (!quiet) {
    std::printf(
        "tandem compare: speed-up over %s (x > 1: faster); kernel only / end to end (host data in and out; "
        "the fastest of pageable, pinned, overlapped on two queues and managed memory where the runtime has "
        "them)\n",
        baseline.c_str());
  }
  for (const std::string& algorithm : sweep::algorithm_names()) {
    std::vector<const sweep::Result*> base;
    for (const auto& r : results) {
      if (r.algorithm == algorithm && r.backend == baseline) base.push_back(&r);
    }
    if (base.empty()) continue;
    if (!quiet) {
      std::printf("\n%-7s %8s %12s", algorithm.c_str(), "size", (baseline + " ms").c_str());
      for (const std::string& b : order) {
        if (b != baseline) std::printf(" %22s", (b + " kernel / e2e").c_str());
      }
      std::printf("\n");
    }
    for (const sweep::Result* br : base) {
      if (!quiet) std::printf("%-7s %8s %12.4g", "", size_text(*br).c_str(), br->kernel.median_ms);
      for (const std::string& b : order) {
        if (b == baseline) continue;
        auto it = at.find({algorithm, b, br->size});
        if (it == at.end()) {
          if (!quiet) std::printf(" %22s", "-");
          continue;
        }
        const sweep::Result& r = *it->second;
        const double kernel = br->kernel.median_ms / r.kernel.median_ms;
        const double e2e = br->e2e_pageable_ms / r.best_e2e_ms();
        char cell[48];
        std::snprintf(cell, sizeof cell, "%.3gx / %.3gx", kernel, e2e);
        if (!quiet) std::printf(" %22s", cell);
      }
      if (!quiet) std::printf("\n");
    }
    for (const std::string& b : order) {
      if (b == baseline) continue;
      // The smallest size from which the backend is faster end to end at every larger size measured.
      Crossover x{algorithm, b, 0, false};
      for (auto it = base.rbegin(); it != base.rend(); ++it) {
        auto other = at.find({algorithm, b, (*it)->size});
        if (other == at.end()) continue;
        x.measured = true;
        const sweep::Result& r = *other->second;
        if (r.best_e2e_ms() < (*it)->e2e_pageable_ms) {
          x.size = (*it)->size;
        } else {
          break;
        }
      }
      if (x.measured) crossovers.push_back(x);
    }
  }
  if (!quiet) {
    std::printf("\n");
    for (const Crossover& x : crossovers) {
      if (x.size) {
        std::printf("%s on %s wins end to end from %zu%s\n", x.algorithm.c_str(), x.backend.c_str(), x.size,
                    x.algorithm == "matmul" ? "^3" : " elements");
      } else {
        std::printf("%s on %s never wins end to end in the measured range\n", x.algorithm.c_str(), x.backend.c_str());
      }
    }
    if (order.size() == 1) std::printf("only %s was measured: nothing to compare it with.\n", baseline.c_str());
    bool gpu = false;
    for (const auto& r : results) gpu = gpu || r.kind == "gpu";
    if (!gpu) {
      std::printf("no GPU backend ran here:\n");
      print_missing();
    }
  }
  if (!c.crossover_path.empty()) {
    // For backend_for() (TANDEM_CROSSOVER): the first backend that wins, per algorithm.
    std::string lines = "# tandem crossover, written by tandem compare: algorithm backend size-from-which-it-wins\n";
    std::vector<std::string> done;
    for (const Crossover& x : crossovers) {
      if (x.size == 0 || std::find(done.begin(), done.end(), x.algorithm) != done.end()) continue;
      lines += x.algorithm + " " + x.backend + " " + std::to_string(x.size) + "\n";
      done.push_back(x.algorithm);
    }
    write_text(c.crossover_path, lines);
    if (!quiet)
      std::printf("crossover written to %s (use it with TANDEM_CROSSOVER=%s)\n", c.crossover_path.c_str(),
                  c.crossover_path.c_str());
  }
  std::string text = sweep::json(results, "tandem compare");
  std::string xs = ",\n  \"baseline\": " + json_string(baseline) + ",\n  \"crossover\": [";
  for (std::size_t i = 0; i < crossovers.size(); ++i) {
    const Crossover& x = crossovers[i];
    xs += std::string(i ? ", " : "") + "{\"algorithm\": " + json_string(x.algorithm) +
          ", \"backend\": " + json_string(x.backend) +
          ", \"end_to_end_from\": " + (x.size ? std::to_string(x.size) : "null") + "}";
  }
  xs += "]\n}\n";
  text.replace(text.rfind("\n}\n"), 3, xs);
  outputs(c, results, "tandem compare", text);
  return 0;
}

}  // namespace tandem::cli
