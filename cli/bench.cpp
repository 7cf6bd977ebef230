// tandem bench: every algorithm x backend x tier/variant x size, kernel-only and end to end, with
// the limit measured in the same run. tandem compare: the speed-up of each backend over the CPU
// at each size and the size from which it wins end to end.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "levels.hpp"
#include "options.hpp"
#include "sweep.hpp"
#include "tandem/tandem.hpp"

namespace tandem::cli {
namespace {

struct Common {
  sweep::Options sweep;
  std::string csv_path, plot_dir, crossover_path;
  JsonOption json;
};

void add_common(CLI::App* sub, Common& c, bool compare) {
  sub->add_flag("--full", c.sweep.full,
                "the whole size range, and the naive and tiled matmul tiers up to 1024^3 (default: a quick subset, "
                "under a minute on 2 cores)");
  sub->add_option("--backend", c.sweep.backends,
                  "measure this backend (repeatable; default: every available one but the reference and the "
                  "simulators)")
      ->type_name("NAME");
  sub->add_option("--algorithm", c.sweep.algorithms, "measure this algorithm (repeatable; default: all)")
      ->check(CLI::IsMember(sweep::algorithm_names()));
  sub->add_option("--min-time", c.sweep.min_seconds, "time each kernel for at least S seconds")
      ->check(real_number(1e-4, 10))
      ->type_name("S")
      ->capture_default_str();
  sub->add_flag(
      "--warm", [&c](std::int64_t) { c.sweep.flush = false; },
      "keep the caches warm between kernel runs (default: data that fits in the last-level cache is "
      "evicted before each run)");
  c.json.add(sub, "every measurement");
  output_file(sub, sub->add_option("--csv", c.csv_path, "every measurement as CSV (- for standard output)")
                       ->type_name("FILE"));
  output_folder(sub, sub->add_option("--plot", c.plot_dir, "PNG plots in DIR (needs python3-matplotlib)")
                         ->type_name("DIR"));
  if (compare) {
    output_file(sub, sub->add_option("--crossover", c.crossover_path,
                                     "the sizes from which each backend wins, for TANDEM_CROSSOVER (not written when "
                                     "the numbers are noise)")
                         ->type_name("FILE"));
  }
}

// Warns on standard error when the numbers are noise; returns the assessment for the JSON.
Json noise_report(const sweep::Noise& n, const char* command) {
  if (n.noisy) std::fprintf(stderr, "tandem %s: warning: these numbers are noise: %s\n", command, n.why.c_str());
  return Json{{"noisy", n.noisy},
              {"why", n.why},
              {"load_average", n.load_average},
              {"cpus", n.cpus},
              {"spread_rows", n.spread_rows},
              {"timed_rows", n.timed_rows}};
}

int machine_cpus() {
  const int cpus = cpu_topology().logical_cpus;
  return cpus > 0 ? cpus : static_cast<int>(std::thread::hardware_concurrency());
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

void outputs(const Common& c, const std::vector<sweep::Result>& results, const std::string& command, const Json& doc) {
  c.json.write(doc);
  if (!c.csv_path.empty()) write_text(c.csv_path, sweep::csv(results));
  if (!c.plot_dir.empty()) {
    sweep::plot_json(doc, c.plot_dir, "results.json");
    (void)command;
    std::printf("plots written to %s\n", c.plot_dir.c_str());
  }
}

// Backends tandem knows but cannot run here, with the reason (what a comparison is missing).
void print_missing() {
  for (const auto& info : backends()) {
    if (!info.available && info.kind == BackendKind::gpu) {
      std::printf("  %s: %s\n", info.name.c_str(), info.reason.c_str());
    }
  }
}

int run_bench(Common& c) {
  c.sweep.variants = true;
  c.sweep.progress_label = "tandem bench";
  const bool quiet = c.json.to_stdout() || c.csv_path == "-";
  const double load = sweep::load_average();
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
        "kernel times start with the operands evicted from the caches where they fit in them; w: warm "
        "(data larger than the caches, or --warm)\ne2e overlap: pinned, in chunks on two queues (add, axpy, sum, dot from 64K); e2e "
        "managed: through managed memory where the runtime has it; -: not measured\n");
  }
  Json doc = sweep::json(results, "tandem bench");
  doc["noise"] = noise_report(sweep::assess_noise(results, load, machine_cpus()), "bench");
  outputs(c, results, "tandem bench", doc);
  return 0;
}

struct Crossover {
  std::string algorithm, backend;
  std::size_t size = 0;  // 0: never in the measured range
  bool measured = false;
};
using ResultsAt = std::map<std::tuple<std::string, std::string, std::size_t>, const sweep::Result*>;

// The smallest size from which backend b is faster end to end than the baseline's results `base`
// (ascending sizes) at every larger size measured.
Crossover crossover_of(const std::string& algorithm, const std::string& b,
                       const std::vector<const sweep::Result*>& base, const ResultsAt& at) {
  Crossover x{algorithm, b, 0, false};
  for (auto it = base.rbegin(); it != base.rend(); ++it) {
    auto other = at.find({algorithm, b, (*it)->size});
    if (other == at.end()) continue;
    x.measured = true;
    if (other->second->best_e2e_ms() < (*it)->e2e_pageable_ms) {
      x.size = (*it)->size;
    } else {
      break;
    }
  }
  return x;
}

// The crossovers in words; `alone`: the one backend measured, when there was only one.
void print_crossovers(const std::vector<Crossover>& crossovers, const std::vector<sweep::Result>& results,
                      const std::string& alone) {
  std::printf("\n");
  for (const Crossover& x : crossovers) {
    if (x.size) {
      std::printf("%s on %s wins end to end from %zu%s\n", x.algorithm.c_str(), x.backend.c_str(), x.size,
                  x.algorithm == "matmul" ? "^3" : " elements");
    } else {
      std::printf("%s on %s never wins end to end in the measured range\n", x.algorithm.c_str(), x.backend.c_str());
    }
  }
  if (!alone.empty()) std::printf("only %s was measured: nothing to compare it with.\n", alone.c_str());
  bool gpu = false;
  for (const auto& r : results) gpu = gpu || r.kind == "gpu";
  if (!gpu) {
    std::printf("no GPU backend ran here:\n");
    print_missing();
  }
}

// The TANDEM_CROSSOVER file that backend_for() reads: the first backend that wins, per algorithm.
std::string crossover_file(const std::vector<Crossover>& crossovers) {
  std::string lines = "# tandem crossover, written by tandem compare: algorithm backend size-from-which-it-wins\n";
  std::vector<std::string> done;
  for (const Crossover& x : crossovers) {
    if (x.size == 0 || std::find(done.begin(), done.end(), x.algorithm) != done.end()) continue;
    lines += x.algorithm + " " + x.backend + " " + std::to_string(x.size) + "\n";
    done.push_back(x.algorithm);
  }
  return lines;
}

int run_compare(Common& c) {
  c.sweep.progress_label = "tandem compare";
  const double load = sweep::load_average();
  const auto results = sweep::run(c.sweep);
  const sweep::Noise noise = sweep::assess_noise(results, load, machine_cpus());
  // The CPU baseline: openmp when measured, else the first CPU backend.
  std::string baseline;
  std::vector<std::string> order;
  for (const auto& r : results) {
    if (std::find(order.begin(), order.end(), r.backend) == order.end()) order.push_back(r.backend);
    if (r.kind == "cpu" && (baseline.empty() || r.backend == "openmp")) baseline = r.backend;
  }
  if (baseline.empty()) throw InvalidArgument("tandem compare needs a CPU backend among --backend to compare with");
  ResultsAt at;
  for (const auto& r : results) at[{r.algorithm, r.backend, r.size}] = &r;
  std::vector<Crossover> crossovers;
  const bool quiet = c.json.to_stdout() || c.csv_path == "-";
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
      const Crossover x = crossover_of(algorithm, b, base, at);
      if (x.measured) crossovers.push_back(x);
    }
  }
  if (!quiet) print_crossovers(crossovers, results, order.size() == 1 ? baseline : "");
  const Json noise_json = noise_report(noise, "compare");
  const bool refused = !c.crossover_path.empty() && noise.noisy;
  if (refused) {
    std::fprintf(stderr, "tandem compare: %s not written: rerun on a quiet machine\n", c.crossover_path.c_str());
  } else if (!c.crossover_path.empty()) {
    write_text(c.crossover_path, crossover_file(crossovers));
    if (!quiet)
      std::printf("crossover written to %s (use it with TANDEM_CROSSOVER=%s)\n", c.crossover_path.c_str(),
                  c.crossover_path.c_str());
  }
  Json doc = sweep::json(results, "tandem compare");
  doc["baseline"] = baseline;
  Json xs = Json::array();
  for (const Crossover& x : crossovers) {
    xs.push_back({{"algorithm", x.algorithm},
                  {"backend", x.backend},
                  {"end_to_end_from", x.size ? Json(x.size) : Json(nullptr)}});
  }
  doc["crossover"] = xs;
  doc["noise"] = noise_json;
  outputs(c, results, "tandem compare", doc);
  return refused ? 1 : 0;
}

// bench bandwidth and bench memory, under bench.
std::vector<Command> add_levels(CLI::App* bench) {
  std::vector<Command> out;
  for (const bool memory : {false, true}) {
    auto a = std::make_shared<LevelArgs>();
    CLI::App* sub =
        memory ? bench->add_subcommand(
                     "memory",
                     "CPU read bandwidth by working set, 4 KiB to 256 MiB (--full: 4 GiB): where L1, L2, L3 and RAM "
                     "begin, beside the cache sizes sysfs reports; with a GPU backend, its L1, L2 and device memory "
                     "by a probe kernel (256 KiB to 1 GiB, --full: 4 GiB), shared memory and the host link")
               : bench->add_subcommand("bandwidth",
                                       "host <-> device copies from pageable and pinned memory, 1 KiB to 64 MiB "
                                       "(--full: 1 GiB)");
    sub->add_option(
           "--backend", a->backend,
           memory ? "a GPU backend to probe (default: the host CPU)" : "backend (default: TANDEM_BACKEND, else auto)")
        ->type_name("NAME");
    sub->add_flag("--full", a->full, "the whole size range");
    a->json.add(sub, "the measurements");
    output_folder(sub, sub->add_option("--plot", a->plot, "PNG plots in DIR (needs python3-matplotlib)")->type_name("DIR"));
    out.push_back({sub, [a, memory] { return memory ? bench_memory(*a) : bench_bandwidth(*a); }});
  }
  return out;
}

}  // namespace

std::vector<Command> add_bench(CLI::App& app) {
  auto c = std::make_shared<Common>();
  CLI::App* sub = app.add_subcommand(
      "bench",
      "every algorithm x backend x tier/variant x size: kernel time (median, min-max), GB/s or GFLOP/s as a share of "
      "the copy bandwidth or vendor BLAS measured in the same run, end to end from pageable and pinned memory, "
      "overlapped on two queues and through managed memory (GPU runtimes); 'bench bandwidth' and 'bench memory' "
      "below");
  sub->require_subcommand(0, 1);
  add_common(sub, *c, false);
  std::vector<Command> out = {{sub, [c] { return run_bench(*c); }}};
  for (Command& level : add_levels(sub)) out.push_back(std::move(level));
  return out;
}

Command add_compare(CLI::App& app) {
  auto c = std::make_shared<Common>();
  CLI::App* sub = app.add_subcommand(
      "compare",
      "how much faster each backend is than the CPU at each size, kernel only and end to end (host data in and "
      "out), and the size from which it wins");
  add_common(sub, *c, true);
  return {sub, [c] { return run_compare(*c); }};
}

}  // namespace tandem::cli
