// tandem: the command-line front end.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "tandem/backend.hpp"
#include "tandem/errors.hpp"
#include "tandem/registry.hpp"
#include "tandem/version.hpp"

namespace {

// @ACTIVATIONS@ and @BACKENDS@ are filled in from the op table and the registry (usage()).
const char* kUsageTemplate =
    "usage: tandem <command> [options]\n"
    "\n"
    "commands:\n"
    "  info [--json]          backends compiled in, whether each can run here (and why not),\n"
    "                         and the properties of each available device\n"
    "  check [options]        run every algorithm on a backend and compare it with the float64\n"
    "                         reference; prints one row per case and exits 1 on any failure\n"
    "      --backend NAME     backend to check (default: TANDEM_BACKEND, else every available one)\n"
    "      --quick            fewer sizes (seconds instead of a minute)\n"
    "      --family F         only one family: elementwise, matrix, matmul, reduce, scan, ml\n"
    "      --non-finite       plant NaN and +-Inf in the inputs: results must propagate them alike\n"
    "      --seed N           replay a run (the seed is printed; TANDEM_TEST_SEED works too)\n"
    "      --failures-only    print only the rows that did not pass, and the summary\n"
    "  train [options]        train an MLP classifier on a data set and report loss and held-out\n"
    "                         accuracy per epoch (e.g. tandem train --data data/digits.csv.gz)\n"
    "      --data FILE        CSV (gzip or not), or MNIST IDX images with --labels FILE\n"
    "      --label-column C   last (default), first, or a 0-based index (negative: from the end)\n"
    "      --delimiter C      field separator (default: detected; 'tab' for tabs)\n"
    "      --header H         yes, no or detect (default)\n"
    "      --layers W,W,...   widths from inputs to classes (default: features,128,classes)\n"
    "      --activation A     @ACTIVATIONS@ (default relu)\n"
    "      --epochs N  --batch N  --lr X    (defaults 30, 32, 0.001)\n"
    "      --optimizer O      adam (default; AdamW decay) or sgd;  --momentum X  --weight-decay X\n"
    "      --test-fraction F  held-out share (default 0.2; 0: none)   --seed N (default 42 split, 1 init)\n"
    "      --no-standardize   keep the raw features (default: standardise on the training split)\n"
    "      --dtype f32|f64    --mixed-precision (bf16 matmul inputs, f32 weights, loss scaling)\n"
    "      --distributed      data-parallel over MPI: mpirun -np N tandem train --distributed ...\n"
    "                         (each rank a replica on its share of every batch; rank 0 prints)\n"
    "      --overlap          with --distributed: sum each layer's gradients while backward goes on\n"
    "      --data-placement P auto (default), device (upload once, gather batches there) or stream\n"
    "                         (pinned staging, next batch copied while this one computes)\n"
    "      --graphs           each batch's forward and backward recorded once as a graph and replayed\n"
    "                         (on cuda one CUDA graph launch per batch); not with --overlap\n"
    "      --backend NAME     --save FILE (versioned, checksummed model file)   --json\n"
    "  regress [options]      linear regression with an intercept: coefficients, intercept, R^2, time\n"
    "      --data X.csv       features (CSV, gzip or not)\n"
    "      --target y.csv | --target-column C   the target as a file or as a column of --data\n"
    "      --solver S         closed-form (default; CholeskyQR2) or gradient-descent\n"
    "      --epochs N  --batch N (0: full)  --lr X  --tolerance X  --no-standardize   (gradient descent)\n"
    "      --dtype f32|f64 (default f64)  --test-fraction F  --seed N  --backend NAME  --json\n"
    "  compare [options]      how much faster each backend is than the CPU at each size, kernel only\n"
    "                         and end to end (host data in and out), and the size from which it wins\n"
    "  bench [options]        every algorithm x backend x tier/variant x size: kernel time (median,\n"
    "                         min-max), GB/s or GFLOP/s as a share of the copy bandwidth or vendor BLAS\n"
    "                         measured in the same run, end to end from pageable and pinned memory,\n"
    "                         overlapped on two queues and through managed memory (GPU runtimes)\n"
    "      --full             the whole size range (default: a quick subset, under a minute)\n"
    "      --backend NAME     measure this backend (repeatable; default: every available one but the\n"
    "                         reference and the simulators)\n"
    "      --algorithm A      add, axpy, sum, dot, scan or matmul (repeatable; default: all)\n"
    "      --min-time S       time each kernel for at least S seconds (default 0.02)\n"
    "      --warm             keep the caches warm between kernel runs (default: data that fits in\n"
    "                         the last-level cache is evicted before each run)\n"
    "      --json FILE  --csv FILE   (- for stdout)   --plot DIR (PNGs, needs python3-matplotlib)\n"
    "      --crossover FILE   (compare) the sizes from which each backend wins, for TANDEM_CROSSOVER\n"
    "  bench bandwidth [--backend NAME] [--full] [--json FILE] [--plot DIR]\n"
    "                         host <-> device copies from pageable and pinned memory, 1 KiB to 64 MiB\n"
    "                         (--full: 1 GiB)\n"
    "  bench memory [--backend NAME] [--full] [--json FILE] [--plot DIR]\n"
    "                         CPU read bandwidth by working set, 4 KiB to 256 MiB (--full: 4 GiB):\n"
    "                         where L1, L2, L3 and RAM begin, beside the cache sizes the OS reports;\n"
    "                         with a GPU backend, its L1, L2 and device memory by a probe kernel\n"
    "                         (256 KiB to 1 GiB, --full: 4 GiB), shared memory and the host link\n"
    "  --version              print the version\n"
    "  --help                 this text\n"
    "\n"
    "environment: TANDEM_BACKEND=NAME (@BACKENDS@, NAME:DEVICE, auto),\n"
    "             TANDEM_TEST_SEED=N, TANDEM_DEBUG_MEMORY=1 (report buffers alive at exit),\n"
    "             TANDEM_CPU_ISA=generic|avx2|avx512 (cap the openmp micro-kernel),\n"
    "             TANDEM_SIM_SEED=N (the simulator's thread order), TANDEM_SIM_THREADS=N,\n"
    "             TANDEM_PROFILE=trace.json (every op, timed, as a Chrome/Perfetto trace at exit),\n"
    "             TANDEM_CROSSOVER=FILE (tandem::backend_for: CPU or GPU by measured crossover).\n";

std::string replace_all(std::string text, const std::string& key, const std::string& value) {
  for (std::size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size())) {
    text.replace(at, key.size(), value);
  }
  return text;
}

// The usage text with the lists that must not drift filled in.
const std::string& usage() {
  static const std::string text = [] {
    std::string backends;
    for (const auto& name : tandem::backend_names()) backends += (backends.empty() ? "" : ", ") + name;
    return replace_all(replace_all(kUsageTemplate, "@ACTIVATIONS@", tandem::activation_names()), "@BACKENDS@",
                       backends);
  }();
  return text;
}

// The lines of the usage about one command: its entry and the lines under it (with "bench", its
// bandwidth and memory entries too).
std::string help_for(const std::string& command) {
  std::istringstream in(usage());
  std::string line, out;
  bool inside = false;
  while (std::getline(in, line)) {
    const bool entry = line.size() > 2 && line.rfind("  ", 0) == 0 && line[2] != ' ';
    if (entry) {
      inside = line.rfind("  " + command + " ", 0) == 0;
    } else if (line.empty() || line[0] != ' ') {
      inside = false;
    }
    if (inside) out += line + "\n";
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(usage().c_str(), args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    std::printf("tandem %s\n", tandem::version_string);
    return 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  if (std::find_if(args.begin(), args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; }) !=
      args.end()) {
    // tandem COMMAND --help: that command's part of the usage.
    const std::string sub = command == "bench" && !args.empty() && (args[0] == "memory" || args[0] == "bandwidth")
                                ? command + " " + args[0]
                                : command;
    const std::string text = help_for(sub);
    if (text.empty()) {
      std::fprintf(stderr, "tandem: unknown command '%s'\n\n%s", command.c_str(), usage().c_str());
      return 2;
    }
    std::printf("usage: tandem %s [options]\n\n%s", sub.c_str(), text.c_str());
    if (command == "compare") std::printf("\noptions as for bench:\n%s", help_for("bench").c_str());
    return 0;
  }
  try {
    if (command == "info") return tandem::cli::info_main(args);
    if (command == "check") return tandem::cli::check_main(args);
    if (command == "train") return tandem::cli::train_main(args);
    if (command == "regress") return tandem::cli::regress_main(args);
    if (command == "bench") return tandem::cli::bench_main(args);
    if (command == "compare") return tandem::cli::compare_main(args);
  } catch (const tandem::Error& e) {
    std::fprintf(stderr, "tandem %s: %s\n", command.c_str(), e.what());
    std::fflush(stderr);
    tandem::cli::end_distributed_job(2);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem %s: unexpected error: %s\n", command.c_str(), e.what());
    std::fflush(stderr);
    tandem::cli::end_distributed_job(2);
    return 2;
  }
  std::fprintf(stderr, "tandem: unknown command '%s'\n\n%s", command.c_str(), usage().c_str());
  return 2;
}
