// The openmp backend's store tuning and the scan's and sums' prefetch (openmp_backend.hpp:
// StoreTuning, prefetch.hpp: ReadPrefetch), the size from which its loops run on the team
// (ParallelTuning), and the register_blocked tier's f32 cache blocking (GemmTuning):
// from the environment, a cache file of an earlier calibration, a calibration now, or a table
// (by CPU vendor; by micro-kernel for the blocking), in that order. The cache is a few
// "key value" lines per file in TANDEM_CACHE_DIR (else $XDG_CACHE_HOME/tandem, else
// ~/.cache/tandem), keyed by CPU model, thread count and tandem version (and the ISA of the
// kernels measured: the elementwise kernels' for the stores, the micro-kernel's for the blocking);
// deleting it, or TANDEM_TUNING=calibrate, measures again.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "../host/cpu_info.hpp"
#include "kernels.hpp"
#include "openmp_backend.hpp"
#include "tandem/environment.hpp"
#include "tandem/topology.hpp"
#include "tandem/version.hpp"

namespace tandem::openmp {

// ---- the calibrations' arrays and loops ----

CalibrationArrays::CalibrationArrays(std::size_t bytes, std::size_t window_bytes) {
  // The whole number of windows nearest bytes / window_bytes (at least one), so that the arrays
  // stay within a window's rounding of `bytes`.
  const std::size_t windows =
      std::max<std::size_t>(1, (bytes + window_bytes / 2) / std::max<std::size_t>(window_bytes, 1));
  window = bytes / windows / sizeof(float) / 64 * 64;
  if (window < kParallelFromTable) return;
  n = windows * window;
  a = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  b = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  c = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
  if (!ok()) return;
#pragma omp parallel
  {
    // Window by window, each split among the threads as the runs split it (on a machine with
    // several memory nodes, each thread's part of every window is then on its own node).
    for (std::size_t w = 0; w < windows; ++w) {
#pragma omp for schedule(static)
      for (std::size_t i = w * window; i < (w + 1) * window; ++i) {
        a[i] = 0;
        b[i] = float(i & 255);
        c[i] = float(i & 127);
      }
    }
  }
}

CalibrationArrays::~CalibrationArrays() {
  std::free(a);
  std::free(b);
  std::free(c);
}

std::vector<StoreVariant> measure_store_variants(const CalibrationArrays& arrays, int reps) {
  if (!arrays.ok()) return {};
  return calibration_loops().store_variants(arrays, reps);
}

const std::vector<ReadPrefetch>& scan_prefetch_variants() {
  static const std::vector<ReadPrefetch> variants = {kScanPrefetchTable, {4096, false}, {2048, true},
                                                     {4096, true},       {8192, true},  {0, false}};
  return variants;
}

// Unprefetched first, so that a prefetch must beat the hardware prefetchers alone by 3%
// (first_near_the_fastest): where it does not, it only competes with them for the line-fill
// buffers (Zen 4 EPYC: l2:2048 calibrated level with none, then cost dot 0-12%, sum 4-18%). With the
// AVX-512 kernels the AVX2 loops come first of all, so that 512-bit loads must win by 3% too (Zen 4
// EPYC: 256-bit loads read a median 6.5% more). Then the table's prefetch, then into L1.
std::vector<SumVariant> reduce_variants() {
  std::vector<SumVariant> variants;
#ifdef TANDEM_X86_KERNELS
  if (kernels_isa() == "avx512") variants.push_back({true, {0, false}});
#endif
  for (const ReadPrefetch pf : {ReadPrefetch{0, false}, kReducePrefetchTable, ReadPrefetch{2048, false}}) {
    variants.push_back({false, pf});
  }
  return variants;
}

std::string sum_variant_key(const SumVariant& v) { return (v.narrow ? "avx2 " : "") + prefetch_key(v.pf); }

namespace {

// GB/s of `bytes_per_run` per run for each variant's time.
std::vector<double> gigabytes_per_second(double bytes_per_run, const std::vector<double>& seconds) {
  std::vector<double> gbs;
  for (const double t : seconds) gbs.push_back(bytes_per_run / t / 1e9);
  return gbs;
}

}  // namespace

std::vector<double> measure_reduce_variants(const CalibrationArrays& arrays, int reps) {
  // A dot: two inputs prefetched per stream, where a prefetch that does not pay costs most (twice
  // what it costs a sum).
  if (!arrays.ok()) return {};
  const std::vector<SumVariant> variants = reduce_variants();
  float result = 0;
  std::size_t done = 0;
  // The median, not the fastest: a prefetch that costs 15-20% in most runs can match none in its
  // fastest.
  auto run = [&](std::size_t v) {
    const std::size_t at = arrays.offset(done++);
    const float* b = arrays.b + at;
    const float* c = arrays.c + at;
#ifdef TANDEM_X86_KERNELS
    if (variants[v].narrow) {
      sum_loops_avx2().dot(DType::f32, arrays.window, b, c, &result, variants[v].pf);
      return;
    }
#endif
    calibration_loops().dot(arrays.window, b, c, &result, variants[v].pf);
  };
  return gigabytes_per_second(2.0 * double(arrays.window * sizeof(float)),
                              median_in_rotating_rounds(variants.size(), reps, run));
}

std::vector<double> measure_scan_prefetch(const CalibrationArrays& arrays, int reps, bool stream) {
  if (!arrays.ok()) return {};
  const std::vector<ReadPrefetch>& variants = scan_prefetch_variants();
  std::size_t done = 0;
  // An untimed pass of each, then rounds that take the variants in turn, each starting one further on (as
  // the store and gemm calibrations), so that a change in the machine's memory speed (seen on
  // shared VMs) falls on all of them alike and no variant is always first.
  return gigabytes_per_second(2.0 * double(arrays.window * sizeof(float)),
                              fastest_in_rotating_rounds(variants.size(), reps, [&](std::size_t v) {
                                const std::size_t at = arrays.offset(done++);
                                calibration_loops().scan(arrays.window, arrays.b + at, arrays.a + at,
                                                         stream ? 0 : SIZE_MAX, variants[v]);
                              }));
}

// ---- the tunings: environment, cache file, calibration or table ----

namespace {

namespace fs = std::filesystem;

// First needed inside an active parallel region, where the calibration's own loops would run on
// one thread (or beside the caller's threads): the table, for the rest of the process, and
// nothing cached.
constexpr const char* kNestedNote = "; not measured: first needed inside a parallel region";

std::string describe(const std::vector<StoreVariant>& measured) {
  std::string text;
  char item[64];
  for (const StoreVariant& v : measured) {
    std::snprintf(item, sizeof item, "%s%s x%d %.1f", text.empty() ? "" : ", ",
                  v.in_place ? "in-place" : (v.stream ? "streaming" : "plain"), v.runs, v.gbs);
    text += item;
  }
  return text.empty() ? text : text + " GB/s";
}

// Used without a calibration: four streaming runs per thread on Intel, two elsewhere (AMD's
// write-combining buffers are fewer per core: four runs there lose up to two thirds).
StoreTuning from_table() {
  StoreTuning t;
  const std::string vendor = host::cpu_vendor();
  t.runs = t.update_runs = vendor == "GenuineIntel" ? 4 : 2;
  t.source = "table (" + (vendor.empty() ? std::string("unknown vendor") : vendor) + ")";
  return t;
}

fs::path cache_dir() {
  if (const auto dir = env::text("TANDEM_CACHE_DIR")) return fs::path(*dir);
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') return fs::path(xdg) / "tandem";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return fs::path(home) / ".cache" / "tandem";
  }
  return {};
}

// What the cache entry must say to be this machine's, and measured the way this build measures
// ("calibration": files from a calibration that timed the variants in one fixed order, which
// favoured the last ones, are measured again; and those from before the scan prefetch was timed
// in rotating rounds and the gemm packed its panels in order, which moved the blockings' speeds).
std::map<std::string, std::string> cache_key() {
  return {{"cpu", host::cpu_model_name()},
          {"threads", std::to_string(omp_get_max_threads())},
          {"version", version_string},
          {"calibration", "rotating-rounds"}};
}

// A store entry is also the elementwise kernels' ISA: its choices were timed in their code, the
// line loops and the scan's passes compiled per ISA (the same variant moves a fifth more bytes
// with AVX2's kernels than with the generic ones), so TANDEM_CPU_ISA=avx2 on an AVX-512 CPU must
// not take the AVX-512 kernels' entry. "sums": entries whose sums were chosen with the table's
// prefetch first within the noise, and without the AVX2 loops (reduce_variants), are measured
// again.
std::map<std::string, std::string> store_cache_key() {
  auto key = cache_key();
  key["kernels"] = std::string(kernels_isa());
  key["sums"] = "unprefetched-avx2-first";
  return key;
}

// One file per kind of tuning and machine: openmp-KIND-HASH.txt, HASH of the key it was made for.
fs::path cache_file(const char* kind, const std::map<std::string, std::string>& key) {
  const fs::path dir = cache_dir();
  if (dir.empty()) return {};
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (const auto& [k, v] : key) {
    for (char ch : k + "=" + v + ";") h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ULL;
  }
  char name[64];
  std::snprintf(name, sizeof name, "openmp-%s-%016llx.txt", kind, static_cast<unsigned long long>(h));
  return dir / name;
}

// The index of the first of `speeds`, in the order the candidates are listed (the preferred
// first: the table's, or what measured better where it differed), within 3% of the fastest:
// within the noise, keep what was measured on more CPUs, or the simpler (a variant 1.5% faster
// in one calibration can be 10-25% slower in the next).
std::size_t first_near_the_fastest(const std::vector<double>& speeds) {
  const double fastest = *std::max_element(speeds.begin(), speeds.end());
  std::size_t v = 0;
  while (speeds[v] * 1.03 < fastest) ++v;
  return v;
}

// "l2:2048 24.3, off 26.6 GB/s": each prefetch variant's speed, or "" when none was measured.
std::string describe_prefetch(const std::vector<ReadPrefetch>& variants, const std::vector<double>& gbs) {
  std::string text;
  for (std::size_t v = 0; v < gbs.size() && v < variants.size(); ++v) {
    char item[64];
    std::snprintf(item, sizeof item, "%s%s %.1f", v == 0 ? "" : ", ", prefetch_key(variants[v]).c_str(), gbs[v]);
    text += item;
  }
  return text.empty() ? text : text + " GB/s";
}

// A prefetch as TANDEM_OPENMP_SCAN_PREFETCH, TANDEM_OPENMP_REDUCE_PREFETCH and the cache file write it.
ReadPrefetch prefetch_of(const env::CacheDistance& d) { return {d.bytes, d.level == 2}; }

bool whole_runs(const std::string& text, int& runs) {
  if (text != "1" && text != "2" && text != "4") return false;
  runs = text[0] - '0';
  return true;
}

// The "key value" lines of a cache file, when it is there, reads cleanly and was made for `key`.
std::optional<std::map<std::string, std::string>> read_entry(const fs::path& file,
                                                             const std::map<std::string, std::string>& key) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::map<std::string, std::string> values;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.find(' ');
    if (space == std::string::npos) return std::nullopt;
    values[line.substr(0, space)] = line.substr(space + 1);
  }
  for (const auto& [k, v] : key) {
    if (values[k] != v) return std::nullopt;
  }
  return values;
}

// Written to a temporary name and renamed: processes calibrating at once never see half a file.
std::string write_entry(const fs::path& file, const std::string& what, const std::map<std::string, std::string>& key,
                        const std::vector<std::pair<std::string, std::string>>& values) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  const fs::path tmp = file.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << "# tandem's openmp " << what << ", measured by a calibration run; delete the file to measure again\n";
    for (const auto& [k, v] : key) out << k << ' ' << v << '\n';
    for (const auto& [k, v] : values) out << k << ' ' << v << '\n';
    if (!out) return "not cached: cannot write " + tmp.string();
  }
  fs::rename(tmp, file, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return "not cached: cannot write " + file.string();
  }
  return "cached in " + file.string();
}

// Whether the sums may read with `isa`'s loops: the kernels' own, or AVX2's under the AVX-512 kernels.
bool sums_isa_allowed(const std::string& isa) {
  return isa == kernels_isa() || (isa == "avx2" && kernels_isa() == "avx512");
}

// The cached store tuning, when the file is there, is this machine's and reads cleanly.
bool read_cache(const fs::path& file, StoreTuning& t) {
  const auto entry = read_entry(file, store_cache_key());
  if (!entry) return false;
  auto values = *entry;
  if (values["stream"] != "0" && values["stream"] != "1") return false;
  if (!whole_runs(values["runs"], t.runs) || !whole_runs(values["update_runs"], t.update_runs)) return false;
  const auto prefetch = env::parse_cache_distance(values["scan_prefetch"]);
  const auto reduce_prefetch = env::parse_cache_distance(values["reduce_prefetch"]);
  if (!prefetch || !reduce_prefetch) return false;  // a file from before the sums were calibrated
  t.scan_prefetch = prefetch_of(*prefetch);
  t.scan_measured = values["scan_measured"];
  t.reduce_prefetch = prefetch_of(*reduce_prefetch);
  const std::string& sums_isa = values["reduce_isa"];
  if (!sums_isa_allowed(sums_isa)) return false;
  t.narrow_sums = sums_isa != kernels_isa();
  t.reduce_measured = values["reduce_measured"];
  t.stream = values["stream"] == "1";
  t.measured = values["measured"];
  t.source = "cached in " + file.string();
  return true;
}

std::string write_cache(const fs::path& file, const StoreTuning& t) {
  return write_entry(file, "store tuning", store_cache_key(),
                     {{"stream", t.stream ? "1" : "0"},
                      {"runs", std::to_string(t.runs)},
                      {"update_runs", std::to_string(t.update_runs)},
                      {"measured", t.measured},
                      {"scan_prefetch", prefetch_key(t.scan_prefetch)},
                      {"scan_measured", t.scan_measured},
                      {"reduce_prefetch", prefetch_key(t.reduce_prefetch)},
                      {"reduce_isa", t.narrow_sums ? std::string("avx2") : std::string(kernels_isa())},
                      {"reduce_measured", t.reduce_measured}});
}

StoreTuning calibrate() {
  // Arrays well past the last-level cache, so that the stores go to memory as a large op's do,
  // timed a window at a time: 32 MiB (2 MiB per thread where that is more), long enough that a
  // run's fork and join and a shared machine's hiccups weigh little.
  const CpuTopology& cpu = cpu_topology();
  const std::size_t last_level = cpu.l3_bytes ? cpu.l3_bytes : cpu.l2_bytes;
  const std::size_t bytes = std::clamp<std::size_t>(2 * last_level, std::size_t(32) << 20, std::size_t(256) << 20);
  const std::size_t window = std::max<std::size_t>(std::size_t(32) << 20, std::size_t(omp_get_max_threads()) << 21);
  const double t0 = omp_get_wtime();
  const CalibrationArrays arrays(bytes, window);
  // Three rounds: a fourth costs a third more time and did not change the choice.
  const std::vector<StoreVariant> measured = measure_store_variants(arrays, 3);
  if (measured.empty()) {
    StoreTuning t = from_table();
    t.source += "; the calibration could not allocate its " + std::to_string(3 * (bytes >> 20)) + " MiB";
    return t;
  }
  StoreTuning t = choose_store_tuning(measured);
  // The scan's prefetch, with the stores just chosen, and the sums' loops and prefetch: for each,
  // the first variant within 3% of the fastest.
  const std::vector<double> scan = measure_scan_prefetch(arrays, 3, t.stream);
  if (!scan.empty()) t.scan_prefetch = scan_prefetch_variants()[first_near_the_fastest(scan)];
  t.scan_measured = describe_prefetch(scan_prefetch_variants(), scan);
  const std::vector<SumVariant> variants = reduce_variants();
  const std::vector<double> sums = measure_reduce_variants(arrays, 5);
  if (!sums.empty()) {
    const SumVariant& chosen = variants[first_near_the_fastest(sums)];
    t.reduce_prefetch = chosen.pf;
    t.narrow_sums = chosen.narrow;
  }
  for (std::size_t v = 0; v < sums.size() && v < variants.size(); ++v) {
    char item[64];
    std::snprintf(item, sizeof item, "%s%s %.1f", v == 0 ? "" : ", ", sum_variant_key(variants[v]).c_str(), sums[v]);
    t.reduce_measured += item;
  }
  if (!t.reduce_measured.empty()) t.reduce_measured += " GB/s";
  char took[128];
  std::snprintf(took, sizeof took, "calibrated now (%.2f s, 3 x %zu MiB in windows of %zu MiB)", omp_get_wtime() - t0,
                arrays.n * sizeof(float) >> 20, arrays.window * sizeof(float) >> 20);
  t.source = took;
  return t;
}

StoreTuning resolve() {
  const std::string mode = env::choice("TANDEM_TUNING", {"auto", "table", "calibrate"}, "auto");
  const auto forced_runs = env::text("TANDEM_OPENMP_STORE_RUNS");
  const auto forced_stores = env::text("TANDEM_OPENMP_STORES");
  const auto forced_prefetch = env::cache_distance("TANDEM_OPENMP_SCAN_PREFETCH");
  const auto forced_reduce_prefetch = env::cache_distance("TANDEM_OPENMP_REDUCE_PREFETCH");
  const auto forced_sums_isa = env::text("TANDEM_OPENMP_REDUCE_ISA");
  if (forced_sums_isa && !sums_isa_allowed(*forced_sums_isa)) {
    throw InvalidArgument(
        "TANDEM_OPENMP_REDUCE_ISA='" + *forced_sums_isa + "': this process's openmp kernels are " +
        std::string(kernels_isa()) + " (the CPU, or TANDEM_CPU_ISA)" +
        (kernels_isa() == "avx512" ? "; give avx512 or avx2" : ", whose sums have no other loops: unset it"));
  }
  int runs = 0;
  if (forced_runs && !whole_runs(*forced_runs, runs)) {
    throw InvalidArgument("TANDEM_OPENMP_STORE_RUNS='" + *forced_runs + "': give 1, 2 or 4 (runs per thread)");
  }
  if (forced_stores && *forced_stores != "streaming" && *forced_stores != "plain") {
    throw InvalidArgument("TANDEM_OPENMP_STORES='" + *forced_stores + "': give streaming or plain");
  }
  StoreTuning t;
  if (forced_runs && forced_stores) {
    t.source = "the environment (TANDEM_OPENMP_STORES, TANDEM_OPENMP_STORE_RUNS); the prefetches the tables'";
  } else if (mode == "table") {
    t = from_table();
  } else if (omp_get_active_level() > 0) {
    t = from_table();
    t.source += kNestedNote;
  } else {
    const fs::path file = cache_file("stores", store_cache_key());
    if (mode == "calibrate" || file.empty() || !read_cache(file, t)) {
      t = calibrate();
      if (!t.measured.empty()) t.source += "; " + (file.empty() ? "not cached: no HOME" : write_cache(file, t));
    }
  }
  if (forced_runs) {
    t.runs = t.update_runs = runs;
    if (!forced_stores) t.source += "; runs from TANDEM_OPENMP_STORE_RUNS";
  }
  if (forced_stores) {
    t.stream = *forced_stores == "streaming";
    if (!forced_runs) t.source += "; stores from TANDEM_OPENMP_STORES";
  }
  if (forced_prefetch) {
    t.scan_prefetch = prefetch_of(*forced_prefetch);
    t.source += "; scan prefetch from TANDEM_OPENMP_SCAN_PREFETCH";
  }
  if (forced_reduce_prefetch) {
    t.reduce_prefetch = prefetch_of(*forced_reduce_prefetch);
    t.source += "; reduction prefetch from TANDEM_OPENMP_REDUCE_PREFETCH";
  }
  if (forced_sums_isa) {
    t.narrow_sums = *forced_sums_isa != kernels_isa();
    t.source += "; the sums' loops from TANDEM_OPENMP_REDUCE_ISA";
  }
  return t;
}

// ---- the register_blocked tier's f32 blocking ----

// A gemm entry is also the micro-kernel's (TANDEM_CPU_ISA=avx2 on an AVX-512 CPU is another).
std::map<std::string, std::string> gemm_cache_key() {
  auto key = cache_key();
  key["kernel"] = best_microkernel_f32().isa;
  return key;
}

// "120,512,3072" with the B panel in L1, "120,512,3072,A" with the A panel.
std::string blocking_key(const Blocking& b) {
  return std::to_string(b.mc) + "," + std::to_string(b.kc) + "," + std::to_string(b.nc) + (b.a_in_l1 ? ",A" : "");
}

std::optional<std::int64_t> block_size(const std::string& text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 1 || v > 16384) return std::nullopt;
  return v;
}

GemmTuning gemm_from_table() {
  GemmTuning t;
  t.blocking = table_blocking(best_microkernel_f32().isa, true);
  t.source = std::string("table: ") + best_microkernel_f32().isa;
  return t;
}

bool read_gemm_cache(const fs::path& file, GemmTuning& t) {
  const auto entry = read_entry(file, gemm_cache_key());
  if (!entry) return false;
  auto values = *entry;
  const auto mc = block_size(values["mc"]), kc = block_size(values["kc"]), nc = block_size(values["nc"]);
  if (!mc || !kc || !nc) return false;
  // (A file from before the order was measured has no such line: measured again.)
  if (values["l1_panel"] != "a" && values["l1_panel"] != "b") return false;
  const bool a_in_l1 = values["l1_panel"] == "a";
  // Only a blocking this build would have chosen: an edited or stale file is measured again.
  const std::vector<Blocking> candidates = gemm_blocking_candidates();
  if (std::none_of(candidates.begin(), candidates.end(), [&](const Blocking& b) {
        return b.mc == *mc && b.kc == *kc && b.nc == *nc && b.a_in_l1 == a_in_l1;
      })) {
    return false;
  }
  t.blocking = {*mc, *kc, *nc, a_in_l1};
  t.measured = values["measured"];
  t.source = "cached in " + file.string();
  return true;
}

GemmTuning calibrate_gemm() {
  const double t0 = omp_get_wtime();
  const std::vector<Blocking> candidates = gemm_blocking_candidates();
  const std::vector<double> gflops = measure_gemm_blockings(candidates);
  GemmTuning t = gemm_from_table();
  if (gflops.empty()) {
    t.source += "; the calibration could not allocate its matrices";
    return t;
  }
  t.blocking = candidates[first_near_the_fastest(gflops)];
  for (std::size_t v = 0; v < gflops.size(); ++v) {
    char item[80];
    std::snprintf(item, sizeof item, "%s%s %.1f", v == 0 ? "" : ", ", blocking_key(candidates[v]).c_str(), gflops[v]);
    t.measured += item;
  }
  t.measured += " GFLOP/s";
  char took[64];
  std::snprintf(took, sizeof took, "calibrated now (%.2f s)", omp_get_wtime() - t0);
  t.source = took;
  return t;
}

GemmTuning resolve_gemm() {
  const std::string mode = env::choice("TANDEM_TUNING", {"auto", "table", "calibrate"}, "auto");
  if (mode == "table") return gemm_from_table();
  if (omp_get_active_level() > 0) {
    GemmTuning t = gemm_from_table();
    t.source += kNestedNote;
    return t;
  }
  GemmTuning t;
  const fs::path file = cache_file("gemm", gemm_cache_key());
  if (mode == "calibrate" || file.empty() || !read_gemm_cache(file, t)) {
    t = calibrate_gemm();
    if (!t.measured.empty()) {
      t.source += "; " + (file.empty() ? std::string("not cached: no HOME")
                                       : write_entry(file, "gemm blocking", gemm_cache_key(),
                                                     {{"mc", std::to_string(t.blocking.mc)},
                                                      {"kc", std::to_string(t.blocking.kc)},
                                                      {"nc", std::to_string(t.blocking.nc)},
                                                      {"l1_panel", t.blocking.a_in_l1 ? "a" : "b"},
                                                      {"measured", t.measured}}));
    }
  }
  return t;
}

// ---- the size from which loops run on the team ----

// A parallel entry is also the team's and its wait policy's: a sleeping team wakes slower.
std::map<std::string, std::string> parallel_cache_key() {
  auto key = store_cache_key();
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  key["wait"] = wait != nullptr && *wait != '\0' ? wait : "default";
  return key;
}

std::string describe_parallel(const std::vector<std::size_t>& sizes, const std::vector<double>& one,
                              const std::vector<double>& team) {
  std::string text = "the team's time over one thread's at";
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    char item[48];
    std::snprintf(item, sizeof item, "%s %zuK %.2f", i == 0 ? "" : ",", sizes[i] >> 10, team[i] / one[i]);
    text += item;
  }
  return text;
}

// An f32 add of 1K to 256K elements (in the L2 cache or near it, as a small op's data is), timed
// on the calling thread and on the team in turn, the best of three rounds of enough adds to take
// about a millisecond.
ParallelTuning calibrate_parallel() {
  const double t0 = omp_get_wtime();
  std::vector<std::size_t> sizes;
  for (std::size_t n = 1 << 10; n <= (1 << 18); n <<= 1) sizes.push_back(n);
  std::vector<float> a(sizes.back(), 1.0f), b(sizes.back(), 2.0f), c(sizes.back());
  const CalibrationLoops& loops = calibration_loops();
  std::vector<double> one(sizes.size(), 0.0), team(sizes.size(), 0.0);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::size_t n = sizes[i];
    const int reps = static_cast<int>(std::max<std::size_t>(4, (std::size_t(1) << 19) / n));
    const auto times = times_in_rotating_rounds(2, 3, [&](std::size_t v) {
      for (int r = 0; r < reps; ++r) loops.add(n, a.data(), b.data(), c.data(), v == 1);
    });
    one[i] = *std::min_element(times[0].begin(), times[0].end());
    team[i] = *std::min_element(times[1].begin(), times[1].end());
  }
  ParallelTuning t;
  t.from = choose_parallel_from(sizes, one, team);
  t.measured = describe_parallel(sizes, one, team);
  char took[96];
  std::snprintf(took, sizeof took, "calibrated now (%.0f ms, f32 adds on %d threads and on one)",
                1e3 * (omp_get_wtime() - t0), omp_get_max_threads());
  t.source = took;
  return t;
}

// A cache entry's whole number, when the text is one and nothing else.
template <class T>
std::optional<T> whole_number(const std::string& text) {
  T value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool read_parallel_cache(const fs::path& file, ParallelTuning& t) {
  const auto entry = read_entry(file, parallel_cache_key());
  if (!entry) return false;
  auto values = *entry;
  const auto from = whole_number<std::size_t>(values["from"]);
  if (!from) return false;
  t.from = *from;
  t.measured = values["measured"];
  t.source = "cached in " + file.string();
  return true;
}

ParallelTuning resolve_parallel() {
  ParallelTuning t;
  if (const auto forced = env::parallel_from()) {
    t.from = static_cast<std::size_t>(*forced);
    t.source = "TANDEM_OPENMP_PARALLEL_FROM";
    return t;
  }
  const std::string mode = env::choice("TANDEM_TUNING", {"auto", "table", "calibrate"}, "auto");
  t.source = "table";
  if (mode == "table") return t;
  if (omp_get_active_level() > 0) {
    t.source += kNestedNote;
    return t;
  }
  if (omp_get_max_threads() < 2) {
    t.source += "; not measured: first needed with a team of one thread (OMP_NUM_THREADS=1, or a busy machine)";
    return t;
  }
  const fs::path file = cache_file("parallel", parallel_cache_key());
  if (mode != "calibrate" && !file.empty() && read_parallel_cache(file, t)) return t;
  t = calibrate_parallel();
  t.source += "; " + (file.empty() ? std::string("not cached: no HOME")
                                   : write_entry(file, "parallel threshold", parallel_cache_key(),
                                                 {{"from", std::to_string(t.from)}, {"measured", t.measured}}));
  return t;
}

// ---- sizes from which one way of a matmul beats another ----

Crossover calibrate_crossover(const CrossoverSpec& spec, const std::function<void(std::int64_t, bool)>& run) {
  const double t0 = omp_get_wtime();
  std::vector<std::int64_t> sizes;
  std::vector<double> first(spec.edges.size()), second(spec.edges.size());
  std::string measured = spec.ratio + " at";
  for (std::size_t i = 0; i < spec.edges.size(); ++i) {
    const std::int64_t e = spec.edges[i];
    sizes.push_back(e * e * e);
    // Enough products to take about a millisecond (2^22 multiply-adds), at least two.
    const std::int64_t reps = std::max<std::int64_t>(2, (std::int64_t(1) << 22) / sizes.back());
    const auto times = times_in_rotating_rounds(2, 3, [&](std::size_t v) {
      for (std::int64_t r = 0; r < reps; ++r) run(e, v == 1);
    });
    first[i] = *std::min_element(times[0].begin(), times[0].end());
    second[i] = *std::min_element(times[1].begin(), times[1].end());
    char item[48];
    std::snprintf(item, sizeof item, "%s %lld^3 %.2f", i == 0 ? "" : ",", static_cast<long long>(e),
                  second[i] / first[i]);
    measured += item;
  }
  Crossover c;
  c.from = choose_crossover(sizes, first, second);
  c.measured = measured;
  char took[64];
  std::snprintf(took, sizeof took, "calibrated now (%.0f ms)", 1e3 * (omp_get_wtime() - t0));
  c.source = took;
  return c;
}

}  // namespace

std::int64_t choose_crossover(const std::vector<std::int64_t>& sizes, const std::vector<double>& first,
                              const std::vector<double>& second) {
  std::int64_t from = kNever;
  for (std::size_t i = sizes.size(); i-- > 0;) {
    if (second[i] > 0.9 * first[i]) break;
    from = sizes[i];
  }
  return from;
}

Crossover resolve_crossover(const CrossoverSpec& spec, const std::function<void(std::int64_t, bool)>& run) {
  Crossover c;
  c.from = spec.table;
  const std::string mode = env::choice("TANDEM_TUNING", {"auto", "table", "calibrate"}, "auto");
  c.source = "table";
  if (mode == "table") return c;
  if (omp_get_active_level() > 0) {
    c.source += kNestedNote;
    return c;
  }
  if (spec.needs_team && omp_get_max_threads() < 2) {
    c.source += "; not measured: first needed with a team of one thread";
    return c;
  }
  auto key = parallel_cache_key();
  key.insert(spec.key.begin(), spec.key.end());
  const fs::path file = cache_file(spec.kind, key);
  if (mode != "calibrate" && !file.empty()) {
    if (auto entry = read_entry(file, key)) {
      const auto from = whole_number<std::int64_t>((*entry)["from"]);
      if (from && *from > 0) {
        c.from = *from;
        c.measured = (*entry)["measured"];
        c.source = "cached in " + file.string();
        return c;
      }
    }
  }
  c = calibrate_crossover(spec, run);
  c.source += "; " + (file.empty() ? std::string("not cached: no HOME")
                                   : write_entry(file, spec.kind, key,
                                                 {{"from", std::to_string(c.from)}, {"measured", c.measured}}));
  return c;
}

namespace {
std::atomic<int> whole_team_threads{0};
}  // namespace

void set_whole_team(int threads) { whole_team_threads.store(threads); }
int whole_team() { return whole_team_threads.load(); }

ThreadsScope::ThreadsScope(int threads) {
  if (threads > 0 && !omp_in_parallel() && omp_get_max_threads() != threads) {
    before_ = omp_get_max_threads();
    omp_set_num_threads(threads);
    set_ = true;
  }
}

ThreadsScope::~ThreadsScope() {
  if (set_) omp_set_num_threads(before_);
}

const GemmTuning& gemm_tuning() {
  static const GemmTuning tuning = [] {
    const ThreadsScope whole(whole_team());
    return resolve_gemm();
  }();
  return tuning;
}

StoreTuning choose_store_tuning(const std::vector<StoreVariant>& measured) {
  StoreTuning t;
  const StoreVariant* fresh = nullptr;
  const StoreVariant* in_place = nullptr;
  for (const StoreVariant& v : measured) {
    const StoreVariant*& best = v.in_place ? in_place : fresh;
    // Streaming must win by 3%: within the noise, plain stores keep the output in cache for a
    // reader that follows. So must more runs: within the noise, fewer streams a thread (one run
    // in place is one plain loop; on a Zen 5 that calibrated in place x1 117.0 against x2 120.3
    // GB/s, axpy at 256 MiB then ran at 96-115 GB/s with one run against 86-94 with two).
    const double bar = best != nullptr && ((v.stream && !best->stream) || v.runs > best->runs) ? 1.03 : 1.0;
    if (best == nullptr || v.gbs > bar * best->gbs) best = &v;
  }
  if (fresh != nullptr) {
    t.stream = fresh->stream;
    t.runs = fresh->runs;
  }
  if (in_place != nullptr) t.update_runs = in_place->runs;
  t.measured = describe(measured);
  return t;
}

std::string prefetch_key(ReadPrefetch pf) {
  return pf.bytes == 0 ? std::string("off") : (pf.l2 ? "l2:" : "l1:") + std::to_string(pf.bytes);
}

std::string prefetch_text(ReadPrefetch pf) {
  if (pf.bytes == 0) return "off (the hardware prefetchers alone)";
  return std::to_string(pf.bytes) + " bytes ahead into " + (pf.l2 ? "L2" : "L1");
}

std::size_t choose_parallel_from(const std::vector<std::size_t>& sizes, const std::vector<double>& one_thread,
                                 const std::vector<double>& team) {
  std::size_t from = sizes.empty() ? kParallelFromTable : 2 * sizes.back();
  for (std::size_t i = sizes.size(); i-- > 0;) {
    if (team[i] > 0.9 * one_thread[i]) break;
    from = sizes[i];
  }
  return from;
}

const ParallelTuning& parallel_tuning() {
  static const ParallelTuning tuning = [] {
    const ThreadsScope whole(whole_team());
    return resolve_parallel();
  }();
  return tuning;
}

const StoreTuning& store_tuning() {
  static const StoreTuning tuning = [] {
    const ThreadsScope whole(whole_team());
    return resolve();
  }();
  return tuning;
}

}  // namespace tandem::openmp
