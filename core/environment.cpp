// The TANDEM_* variables: one table of what each takes, and the readers every part of tandem uses,
// so that a value nobody understands is refused with the list instead of silently ignored.
#include "tandem/environment.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <functional>
#include <utility>

#include "tandem/errors.hpp"
#include "tandem/registry.hpp"

extern char** environ;

namespace tandem {
namespace {

std::string joined(const std::vector<std::string>& words, const char* last_sep) {
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    out += i == 0 ? "" : (i + 1 == words.size() ? last_sep : ", ");
    out += words[i];
  }
  return out;
}

std::string backend_values() {
  std::vector<std::string> names = backend_names();
  names.emplace_back("auto");
  return joined(names, " or ") + ", optionally NAME:DEVICE";
}

// How each variable's value is checked (the readers below do the same at the point of use).
struct Checked {
  const char* name;
  std::function<std::string()> values;
  const char* meaning;
  std::function<void()> check;
};

void check_backend() {
  const auto value = env::text("TANDEM_BACKEND");
  if (!value) return;
  const std::string name = value->substr(0, value->find(':'));
  const auto names = backend_names();
  if (name != "auto" && std::find(names.begin(), names.end(), name) == names.end()) {
    throw InvalidArgument("TANDEM_BACKEND='" + *value + "' is not a backend; use " + backend_values());
  }
}

// The openmp backend's settings (a function of their own: table() would pass the size rule).
std::vector<Checked> openmp_rows() {
  return {
      {"TANDEM_OPENMP_STREAM_FROM", [] { return std::string("a size in bytes, or off"); },
       "bytes an op moves (inputs and output) from which the openmp backend writes its output in interleaved "
       "runs, streamed where that pays (default: the last-level cache)",
       [] { env::stream_from(); }},
      {"TANDEM_OPENMP_PARALLEL_FROM", [] { return std::string("a number of elements"); },
       "elements from which the openmp backend's loops run on every thread; below, on the calling thread "
       "(default: measured)",
       [] { env::parallel_from(); }},
      {"TANDEM_OPENMP_PLACEMENT", [] { return std::string("on or off"); },
       "on (default): the openmp backend keeps its team's threads off the CPU of the thread that calls the op "
       "(a worker woken onto it waited there for milliseconds after a pause); off: where the OS puts them",
       [] {
         env::choice("TANDEM_OPENMP_PLACEMENT", {"on", "off"}, "on");
       }},
      {"TANDEM_OPENMP_STORES", [] { return std::string("streaming or plain"); },
       "how the openmp backend writes large outputs (default: measured)",
       [] {
         env::choice("TANDEM_OPENMP_STORES", {"streaming", "plain"}, "streaming");
       }},
      {"TANDEM_OPENMP_STORE_RUNS", [] { return std::string("1, 2 or 4"); },
       "interleaved runs per thread in which the openmp backend writes large outputs (default: measured)",
       [] {
         env::choice("TANDEM_OPENMP_STORE_RUNS", {"1", "2", "4"}, "4");
       }},
      {"TANDEM_OPENMP_SCAN_PREFETCH", [] { return std::string("l1:BYTES, l2:BYTES or off"); },
       "how far ahead, and into which cache, the openmp scan prefetches inputs past the last-level cache "
       "(default: measured)",
       [] { env::cache_distance("TANDEM_OPENMP_SCAN_PREFETCH"); }},
      {"TANDEM_OPENMP_REDUCE_PREFETCH", [] { return std::string("l1:BYTES, l2:BYTES or off"); },
       "how far ahead, and into which cache, the openmp sums (sum, norm2, dot, mse) prefetch inputs past the "
       "last-level cache (default: measured)",
       [] { env::cache_distance("TANDEM_OPENMP_REDUCE_PREFETCH"); }},
      {"TANDEM_OPENMP_REDUCE_ISA", [] { return std::string("avx2, or the kernels' own ISA"); },
       "the loops the openmp sums (sum, norm2, dot, mse) read inputs past the last-level cache with: with the "
       "avx512 kernels, avx2 (256-bit loads) or avx512 (default: measured)",
       [] {
         env::choice("TANDEM_OPENMP_REDUCE_ISA", {"generic", "avx2", "avx512"}, "avx512");
       }},
      {"TANDEM_OPENMP_GEMM_BLOCKING", [] { return std::string("mc,kc,nc"); },
       "the openmp register_blocked tier's cache blocking for every product (default: measured for f32 "
       "products of 512^3 and more, else by micro-kernel)",
       [] { env::whole_list("TANDEM_OPENMP_GEMM_BLOCKING", 3, 1, 16384); }},
      {"TANDEM_OPENMP_GEMM_L1", [] { return std::string("a or b"); },
       "which packed panel the openmp register_blocked tier keeps in L1 while the other's stream past it, "
       "in every product it splits by rows (default: measured with the f32 blocking from 512^3, else b)",
       [] {
         env::choice("TANDEM_OPENMP_GEMM_L1", {"a", "b"}, "b");
       }},
  };
}

const std::vector<Checked>& table() {
  static const std::vector<Checked> rows = [] {
    std::vector<Checked> all = {
        {"TANDEM_BACKEND", backend_values, "the backend default_backend() and the CLI use", check_backend},
        {"TANDEM_CPU_ISA", [] { return std::string("generic, avx2, avx512 or amx"); },
         "the widest instruction set the openmp kernels may use",
         [] {
           env::choice("TANDEM_CPU_ISA", {"generic", "avx2", "avx512", "amx"}, "amx");
         }},
    };
    for (Checked& row : openmp_rows()) all.push_back(std::move(row));
    const std::vector<Checked> rest = {
        {"TANDEM_GPU_GEMM_TILE", [] { return std::string("auto, 64 or 128"); },
         "the block tile of the cuda, hip and sim register_blocked tier: 64 x 64, or 128 x 128 for f32 inputs "
         "(default auto: 128 where its tiles fill every multiprocessor twice)",
         [] {
           env::choice("TANDEM_GPU_GEMM_TILE", {"auto", "64", "128"}, "auto");
         }},
        {"TANDEM_GPU_TENSOR_KERNEL", [] { return std::string("mma_sync, wgmma or wgmma_128"); },
         "the kernel of the cuda and sim tensor_core tier: mma_sync (default, any NVIDIA GPU since sm_80) or "
         "Hopper's TMA and wgmma kernel with 128 x 256 tiles (wgmma) or 128 x 128 (wgmma_128) (sm_90a builds on "
         "compute capability 9.0; bf16 or f16, either operand transposed or not, rows 16-byte aligned; opt-in until a "
         "GPU run has measured it)",
         [] {
           env::choice("TANDEM_GPU_TENSOR_KERNEL", {"mma_sync", "wgmma", "wgmma_128"}, "mma_sync");
         }},
        {"TANDEM_TUNING", [] { return std::string("auto, table or calibrate"); },
         "auto: the CPU tuning cached from a calibration, else measured on first use; table: by CPU vendor, "
         "nothing measured; calibrate: measure again",
         [] {
           env::choice("TANDEM_TUNING", {"auto", "table", "calibrate"}, "auto");
         }},
        {"TANDEM_BACKEND_PATH", [] { return std::string("folders, ':' between them"); },
         "where a shared libtandem looks first for its backend modules (libtandem-cuda.so, -hip, -kokkos)", [] {}},
        {"TANDEM_CACHE_DIR", [] { return std::string("a directory"); },
         "where the CPU tuning is cached (default $XDG_CACHE_HOME/tandem or ~/.cache/tandem)", [] {}},
        {"TANDEM_TEST_SEED", [] { return std::string("a whole number"); },
         "the seed of tandem check and the tests (printed by every run, to replay it)",
         [] { env::whole("TANDEM_TEST_SEED"); }},
        {"TANDEM_CASE_TIMEOUT", [] { return std::string("0 to 86400"); },
         "seconds one case of tandem check or of the test programs may run before the run stops, naming the "
         "case as hung (default 300 for tandem check, 1200 for the tests; 0: no limit)",
         [] { env::whole("TANDEM_CASE_TIMEOUT", 0, 86400); }},
        {"TANDEM_SIM_SEED", [] { return std::string("a whole number"); }, "the simulator's thread order",
         [] { env::whole("TANDEM_SIM_SEED"); }},
        {"TANDEM_SIM_THREADS", [] { return std::string("1 to 1024"); },
         "OS threads the simulator runs blocks on (default: one per core; at most what vm.max_map_count allows "
         "its fiber stacks, 15 at Linux's default, which an error says)",
         [] { env::whole("TANDEM_SIM_THREADS", 1, 1024); }},
        {"TANDEM_SIM_ADVERSARY", [] { return std::string("0 or 1"); },
         "1: the simulator breaks what a GPU does not promise: blocks start in a random order, few resident at "
         "once, threads interleave at every flag access, stores reach other blocks late and loads may read old "
         "values, unless fences, acquire/release or barriers order them; a launch that stops progressing fails",
         [] { env::flag("TANDEM_SIM_ADVERSARY"); }},
        {"TANDEM_SIM_RESIDENT", [] { return std::string("1 to 64"); },
         "with TANDEM_SIM_ADVERSARY: blocks resident at once (default: 1 to 4, drawn per launch)",
         [] { env::whole("TANDEM_SIM_RESIDENT", 1, 64); }},
        {"TANDEM_SIM_WATCHDOG", [] { return std::string("1000 to 2^40"); },
         "with TANDEM_SIM_ADVERSARY: flag accesses (volatile, acquire/release, atomics, fences) and warp exchanges "
         "without progress after which a launch fails as hung (default 2^20)",
         [] { env::whole("TANDEM_SIM_WATCHDOG", 1000, std::uint64_t(1) << 40); }},
        {"TANDEM_SIM_HANG_SECONDS", [] { return std::string("1 to 86400"); },
         "seconds a simulator thread may spin on a flag while no block makes progress before the launch fails as "
         "hung (default 30)",
         [] { env::whole("TANDEM_SIM_HANG_SECONDS", 1, 86400); }},
        {"TANDEM_DEBUG_MEMORY", [] { return std::string("0 or 1"); }, "1: report buffers still alive at exit",
         [] { env::flag("TANDEM_DEBUG_MEMORY"); }},
        {"TANDEM_PROFILE", [] { return std::string("a file path"); },
         "every op, timed, written there as a Chrome/Perfetto trace at exit", [] {}},
        {"TANDEM_CROSSOVER", [] { return std::string("a file path"); },
         "the crossover file of tandem compare --crossover, for backend_for()", [] {}},
        {"TANDEM_DIST_CHECK", [] { return std::string("0 or 1"); },
         "1: data-parallel training compares the replicas' parameters after every epoch",
         [] { env::flag("TANDEM_DIST_CHECK"); }},
    };
    all.insert(all.end(), rest.begin(), rest.end());
    return all;
  }();
  return rows;
}

}  // namespace

const std::vector<EnvironmentVariable>& environment_variables() {
  static const std::vector<EnvironmentVariable> list = [] {
    std::vector<EnvironmentVariable> out;
    for (const Checked& c : table()) out.push_back({c.name, c.values(), c.meaning});
    return out;
  }();
  return list;
}

std::vector<std::string> check_environment() {
  std::vector<std::string> unknown;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("TANDEM_", 0) != 0) continue;
    const std::string name = entry.substr(0, entry.find('='));
    const auto& rows = table();
    const auto row = std::find_if(rows.begin(), rows.end(), [&](const Checked& c) { return name == c.name; });
    if (row == rows.end()) {
      unknown.push_back(name);
    } else {
      row->check();
    }
  }
  return unknown;
}

namespace env {

std::optional<std::string> text(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || value[0] == '\0') return std::nullopt;
  return std::string(value);
}

bool flag(const char* name) {
  const auto value = text(name);
  if (!value || *value == "0") return false;
  if (*value == "1") return true;
  throw InvalidArgument(std::string(name) + "='" + *value + "': use 1 (on) or 0 (off)");
}

std::string choice(const char* name, const std::vector<std::string>& allowed, const std::string& fallback) {
  const auto value = text(name);
  if (!value) return fallback;
  if (std::find(allowed.begin(), allowed.end(), *value) == allowed.end()) {
    throw InvalidArgument(std::string(name) + "='" + *value + "' is not one of " + joined(allowed, " or "));
  }
  return *value;
}

std::optional<std::uint64_t> whole(const char* name, std::uint64_t min, std::uint64_t max) {
  const auto value = text(name);
  if (!value) return std::nullopt;
  std::uint64_t x = 0;
  const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), x);
  if (ec != std::errc() || end != value->data() + value->size() || x < min || x > max) {
    throw InvalidArgument(std::string(name) + "='" + *value + "': use a whole number from " + std::to_string(min) +
                          " to " + std::to_string(max));
  }
  return x;
}

std::optional<std::vector<std::uint64_t>> whole_list(const char* name, std::size_t count, std::uint64_t min,
                                                     std::uint64_t max) {
  const auto value = text(name);
  if (!value) return std::nullopt;
  std::vector<std::uint64_t> out;
  const char* p = value->data();
  const char* const last = p + value->size();
  bool ok = true;
  while (ok && out.size() < count) {
    std::uint64_t x = 0;
    const auto [end, ec] = std::from_chars(p, last, x);
    ok = ec == std::errc() && x >= min && x <= max;
    out.push_back(x);
    p = end;
    if (out.size() < count) ok = ok && p != last && *p++ == ',';
  }
  if (!ok || p != last) {
    throw InvalidArgument(std::string(name) + "='" + *value + "': use " + std::to_string(count) +
                          " whole numbers from " + std::to_string(min) + " to " + std::to_string(max) +
                          ", separated by commas");
  }
  return out;
}

std::optional<CacheDistance> parse_cache_distance(const std::string& text) {
  if (text == "off") return CacheDistance{0, 0};
  if (text.size() < 4 || (text.compare(0, 3, "l1:") != 0 && text.compare(0, 3, "l2:") != 0)) return std::nullopt;
  int bytes = 0;
  const auto [end, ec] = std::from_chars(text.data() + 3, text.data() + text.size(), bytes);
  if (ec != std::errc() || end != text.data() + text.size() || bytes <= 0 || bytes > 65536 || bytes % 64 != 0) {
    return std::nullopt;
  }
  return CacheDistance{text[1] - '0', bytes};
}

std::optional<std::uint64_t> stream_from() {
  const auto value = text("TANDEM_OPENMP_STREAM_FROM");
  if (!value) return std::nullopt;
  if (*value == "off") return UINT64_MAX;
  std::uint64_t bytes = 0;
  const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), bytes);
  if (ec != std::errc() || end != value->data() + value->size()) {
    throw InvalidArgument(
        "TANDEM_OPENMP_STREAM_FROM='" + *value +
        "': give the bytes an op moves (inputs and output) from which stores stream (e.g. 134217728), or off");
  }
  return bytes;
}

std::optional<std::uint64_t> parallel_from() {
  const auto value = text("TANDEM_OPENMP_PARALLEL_FROM");
  if (!value) return std::nullopt;
  std::uint64_t elements = 0;
  const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), elements);
  if (ec != std::errc() || end != value->data() + value->size()) {
    throw InvalidArgument("TANDEM_OPENMP_PARALLEL_FROM='" + *value +
                          "': give the elements from which a loop runs on every thread (e.g. 32768; 0: always)");
  }
  return elements;
}

std::optional<CacheDistance> cache_distance(const char* name) {
  const auto value = text(name);
  if (!value) return std::nullopt;
  const auto parsed = parse_cache_distance(*value);
  if (!parsed) {
    throw InvalidArgument(
        std::string(name) + "='" + *value +
        "': give l1:BYTES or l2:BYTES (the cache, and how far ahead: a multiple of 64 up to 65536), or off");
  }
  return parsed;
}

}  // namespace env
}  // namespace tandem
