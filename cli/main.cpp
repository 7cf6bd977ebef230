// tandem: the command-line front end.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli.hpp"
#include "tandem/errors.hpp"
#include "tandem/version.hpp"

namespace {

const char* kUsage =
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
    "  --version              print the version\n"
    "  --help                 this text\n"
    "\n"
    "environment: TANDEM_BACKEND=NAME (reference, openmp, cuda, cuda:1, hip, sim, sim64, auto),\n"
    "             TANDEM_TEST_SEED=N, TANDEM_DEBUG_MEMORY=1 (report buffers alive at exit),\n"
    "             TANDEM_CPU_ISA=generic|avx2|avx512 (cap the openmp micro-kernel),\n"
    "             TANDEM_SIM_SEED=N (the simulator's thread order), TANDEM_SIM_THREADS=N.\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    std::printf("tandem %s\n", tandem::version_string);
    return 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  try {
    if (command == "info") return tandem::cli::info_main(args);
    if (command == "check") return tandem::cli::check_main(args);
  } catch (const tandem::Error& e) {
    std::fprintf(stderr, "tandem %s: %s\n", command.c_str(), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem %s: unexpected error: %s\n", command.c_str(), e.what());
    return 2;
  }
  std::fprintf(stderr, "tandem: unknown command '%s'\n\n%s", command.c_str(), kUsage);
  return 2;
}
