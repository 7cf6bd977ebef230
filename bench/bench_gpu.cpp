// GPU benchmark: a GPU backend (cuda by default) against the peers measured in the same run, with
// the GPU performance targets of the CUDA/HIP issue checked:
//   add, matrix_add            >= 90% of the device-to-device copy bandwidth at >= 256 MB;
//   sum                        >= 95% of the vendor's reduce (CUB DeviceReduce) at 2^28 to 2^30;
//   inclusive_scan             >= 90% of the vendor's scan (CUB DeviceScan);
//   sgemm f32 4096^3           register_blocked >= 70% of the vendor tier (cuBLAS); tiled, naive reported;
//   bf16 8192^3 (f32 result)   tensor_core >= 70% of the vendor tier (cuBLAS bf16);
//   host <-> device            pageable and pinned bandwidth, and add end to end in chunks on two
//                              queues (copies overlapping compute) against the same done in order.
// The vendor peers are the backend's own variants and tiers: `cub` and `vendor` on cuda,
// `rocprim` on hip (no vendor matmul there); where a backend has none, the row has no ratio.
// Device time: events around each run on the default queue. Each op is timed alternately with
// its peer (op, peer, op, peer, ...) and the ratio is of the two medians. Before a ratio is
// printed, the op's result is compared with the peer's: a fast wrong answer is not a result.
// On the simulators (--backend sim) the sizes are tiny: that run checks this program, not speed;
// --reduce-peer, --scan-peer and --matmul-peer name tandem's own variants and tiers as stand-in
// peers there, so that CI runs the comparisons and the result checks too; targets are not judged.
// Not a test of speed: it exits 0 whether or not a target is met (1 on a wrong result).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "tandem/tandem.hpp"

using namespace tandem;

namespace {

using Row = bench::TargetRow;

using Work = std::function<void()>;

// Medians (ms per call, device time between events on the default queue) of op and peer timed
// alternately, after one warm-up call of each. peer may be empty: op alone. A call shorter than
// 2 ms is timed as several back to back between one pair of events (as many as fill 2 ms, at most
// 64), so that the device is kept busy and the host's launch work between calls (argument
// checks, a vendor's sizing call) is not counted against a kernel that takes a few hundred us.
std::pair<double, double> paired_ms(Backend& be, int reps, const Work& op, const Work& peer) {
  auto calls_for = [&](const Work& f) {
    const Event e0 = be.record_event(Queue{});
    f();
    const Event e1 = be.record_event(Queue{});
    const double once = be.elapsed_ms(e0, e1);
    return once >= 2.0 ? 1 : std::min(64, static_cast<int>(2.0 / std::max(once, 1e-3)) + 1);
  };
  const int op_calls = calls_for(op), peer_calls = peer ? calls_for(peer) : 0;
  be.synchronize(Queue{});
  std::vector<double> a, b;
  for (int r = 0; r < reps; ++r) {
    for (int which = 0; which < (peer ? 2 : 1); ++which) {
      const Work& f = which == 0 ? op : peer;
      const int calls = which == 0 ? op_calls : peer_calls;
      const Event e0 = be.record_event(Queue{});
      for (int c = 0; c < calls; ++c) f();
      const Event e1 = be.record_event(Queue{});
      (which == 0 ? a : b).push_back(be.elapsed_ms(e0, e1) / calls);
    }
  }
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return {a[a.size() / 2], b.empty() ? 0.0 : b[b.size() / 2]};
}

// Host clock, for the end-to-end runs (host data in, host result out).
double median_host_ms(Backend& be, int reps, const Work& f) {
  return 1e3 * bench::median_seconds(reps, [&] {
           f();
           be.synchronize(Queue{});
         });
}

// Uniform in [-1, 1], from the library's generator as the other benchmarks use.
std::vector<float> random_floats(std::size_t n, unsigned seed) {
  data::Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = float(2 * rng.uniform() - 1);
  return v;
}

// Thrown when an op's result differs from its peer's beyond rounding.
struct WrongResult : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// |got - want| <= tol * scale for every element (scale: the magnitude the rounding is relative to).
void expect_close(const std::string& what, const std::vector<float>& got, const std::vector<float>& want, double tol,
                  double scale) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!(std::fabs(double(got[i]) - double(want[i])) <= tol * scale)) {
      throw WrongResult(what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) +
                        " where the peer gave " + std::to_string(want[i]));
    }
  }
}

std::vector<std::string> scan_variant_names(const Backend& be) {
  std::vector<std::string> names;
  for (ScanVariant v : be.scan_variants()) names.emplace_back(name_of(v));
  return names;
}

// "vendor" where the backend keeps the vendor library's variant of reduce or scan, else "".
std::string peer_variant(Backend& be, const std::string& algorithm) {
  if (algorithm == "reduce") {
    for (ReduceVariant v : be.reduce_variants()) {
      if (v == ReduceVariant::vendor) return "vendor";
    }
  }
  if (algorithm == "scan") {
    for (ScanVariant v : be.scan_variants()) {
      if (v == ScanVariant::vendor) return "vendor";
    }
  }
  return "";
}
bool has_tier(Backend& be, DType t, MatmulTier tier) {
  const auto tiers = be.matmul_tiers(t);
  return std::find(tiers.begin(), tiers.end(), tier) != tiers.end();
}

const char* usage =
    "usage: tandem_bench_gpu [--backend NAME] [--quick] [--only SECTIONS] [--json FILE]\n"
    "                        [--reduce-peer V] [--scan-peer V] [--matmul-peer TIER]\n"
    "  a GPU backend (default cuda) against peers measured in the same run, with the GPU targets checked:\n"
    "  add and matrix_add vs device copy bandwidth (256 MB and 1 GB), sum vs the vendor reduce at 2^28 and\n"
    "  2^30 (CUB on cuda, rocPRIM on hip), scan vs the vendor scan, sgemm tiers vs cuBLAS at 4096^3,\n"
    "  tensor_core bf16 and f16 vs cuBLAS at 8192^3, host <-> device bandwidth and copy/compute overlap.\n"
    "  --quick: fewer repeats, no 2^30 sum, bf16 and f16 at 4096^3. On a simulator the sizes are tiny.\n"
    "  --only SECTIONS: some of add, reduce (sum and scan), matmul, transfers, comma-separated (default all).\n"
    "  --reduce-peer, --scan-peer, --matmul-peer: compare with one of tandem's own variants or tiers instead of\n"
    "  the vendor's (a dry run of the comparisons on a backend without a vendor library, such as sim).\n"
    "  Exits 0 whether or not a target is met; 1 when a result differs from its peer's.\n";

// The command line.
struct Args {
  std::string backend = "cuda", json_path, reduce_override, scan_override, peer_tier_override;
  bool quick = false;
  std::vector<std::string> only;  // the sections to measure; empty: all
  bool wants(const std::string& section) const {
    return only.empty() || std::find(only.begin(), only.end(), section) != only.end();
  }
};
const char* const kSections[] = {"add", "reduce", "matmul", "transfers"};
// Parses it; returns -1 to go on, else the exit code (0 after --help, 2 for a bad option), having
// printed `usage` to stderr.
int parse_args(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--backend" && i + 1 < argc) {
      args.backend = argv[++i];
    } else if (a == "--json" && i + 1 < argc) {
      args.json_path = argv[++i];
    } else if (a == "--reduce-peer" && i + 1 < argc) {
      args.reduce_override = argv[++i];
    } else if (a == "--scan-peer" && i + 1 < argc) {
      args.scan_override = argv[++i];
    } else if (a == "--matmul-peer" && i + 1 < argc) {
      args.peer_tier_override = argv[++i];
    } else if (a == "--quick") {
      args.quick = true;
    } else if (a == "--only" && i + 1 < argc) {
      std::stringstream list(argv[++i]);
      for (std::string section; std::getline(list, section, ',');) {
        if (std::find(std::begin(kSections), std::end(kSections), section) == std::end(kSections)) {
          std::fprintf(stderr, "tandem_bench_gpu: --only takes add, reduce, matmul or transfers, not '%s'\n",
                       section.c_str());
          return 2;
        }
        args.only.push_back(section);
      }
    } else {
      std::fputs(usage, stderr);
      return a == "--help" ? 0 : 2;
    }
  }
  return -1;
}

// What every measured section reads: the backend, the sizes' scale, the repeats and the peers.
struct Run {
  Backend& be;
  std::string backend;  // as named on the command line
  bool tiny, quick;     // tiny: a simulator's dry run
  int reps;
  std::string reduce_peer, scan_peer;  // "" where there is none
  MatmulTier peer_tier;                // the vendor tier, or --matmul-peer's
  std::string peer_label;              // the matmul peer as the rows name it
};
// The run's settings, from the command line and what the backend has.
Run plan_run(Backend& be, const DeviceProperties& props, const Args& args) {
  const bool tiny = props.kind == BackendKind::simulator;
  // The matmul peer: the vendor tier where the backend has one (for each dtype), or the override.
  const bool tier_override = !args.peer_tier_override.empty();
  return Run{be,
             args.backend,
             tiny,
             args.quick,
             tiny ? 3 : (args.quick ? 5 : 11),
             args.reduce_override.empty() ? peer_variant(be, "reduce") : args.reduce_override,
             args.scan_override.empty() ? peer_variant(be, "scan") : args.scan_override,
             tier_override ? parse_matmul_tier(args.peer_tier_override) : MatmulTier::vendor,
             tier_override                        ? args.peer_tier_override
             : args.backend.rfind("cuda", 0) == 0 ? std::string("cuBLAS")
                                                  : std::string("vendor")};
}

// "n=2^k", the group of the rows at n elements.
std::string size_group(std::size_t n) { return "n=2^" + std::to_string(int(std::log2(double(n)))); }
// The GB of one array of n floats.
double gb_of(std::size_t n) { return double(n) * 4 / 1e9; }

// add and matrix_add against the device copy, at 256 MB and 1 GB arrays.
void measure_add(const Run& run, std::vector<Row>& rows) {
  const std::vector<std::size_t> add_sizes =
      run.tiny ? std::vector<std::size_t>{std::size_t(1) << 14}
               : std::vector<std::size_t>{std::size_t(1) << 26, std::size_t(1) << 28};  // 256 MB, 1 GB arrays
  for (std::size_t n : add_sizes) {
    const std::string group = size_group(n);
    Buffer x = Buffer::from(run.be, random_floats(n, 1)), y = Buffer::from(run.be, random_floats(n, 2));
    Buffer out(run.be, DType::f32, n), copied(run.be, DType::f32, n);
    const double gb = gb_of(n);
    const Work device_copy = [&] { copy(x, copied); };
    auto [add_ms, copy_ms] = paired_ms(
        run.be, run.reps, [&] { add(x, y, out); }, device_copy);
    rows.push_back({group, "add f32 (2 reads + 1 write)", "GB/s", 3 * gb / add_ms * 1e3, 2 * gb / copy_ms * 1e3,
                    "device copy", 0.90});
    // The same arrays as a square-ish matrix (rows x 4096).
    const auto cols = std::int64_t(std::min<std::size_t>(n, 4096)), mrows = std::int64_t(n) / cols;
    Matrix xm = matrix(x, mrows, cols), ym = matrix(y, mrows, cols), om = matrix(out, mrows, cols);
    auto [madd_ms, copy2_ms] = paired_ms(
        run.be, run.reps, [&] { matrix_add(1.0, xm, 1.0, ym, om); }, device_copy);
    rows.push_back({group, "matrix_add f32 " + std::to_string(mrows) + "x" + std::to_string(cols), "GB/s",
                    3 * gb / madd_ms * 1e3, 2 * gb / copy2_ms * 1e3, "device copy", 0.90});
  }
}

// sum of x (n floats, magnitude: the sum of their |values|) against the vendor's reduce, or alone.
void measure_sum(const Run& run, Buffer& x, std::size_t n, double magnitude, std::vector<Row>& rows) {
  const std::string group = size_group(n);
  const double gb = gb_of(n);
  Buffer r(run.be, DType::f32, 1), pr(run.be, DType::f32, 1);
  const Work ours = [&] { tandem::reduce(ReduceOp::sum, x, r); };
  if (run.reduce_peer.empty()) {
    const double ms = paired_ms(run.be, run.reps, ours, {}).first;
    rows.push_back({group, "sum f32 (1 read)", "GB/s", gb / ms * 1e3, 0, "", 0});
    return;
  }
  const Work peer = [&] { tandem::reduce(ReduceOp::sum, x, pr, Queue{}, parse_reduce_variant(run.reduce_peer)); };
  auto [ms, peer_ms] = paired_ms(run.be, run.reps, ours, peer);
  expect_close("sum at " + group, r.to_vector<float>(), pr.to_vector<float>(), 1e-6, magnitude);
  rows.push_back({group, "sum f32 (1 read)", "GB/s", gb / ms * 1e3, gb / peer_ms * 1e3, run.reduce_peer, 0.95});
}

// inclusive_scan of x against the vendor's scan, or alone; then each of tandem's own grid schemes
// against the same peer, so that one run shows which the default should take.
void measure_scan(const Run& run, Buffer& x, std::size_t n, double magnitude, std::vector<Row>& rows) {
  const std::string group = size_group(n);
  const double gb = gb_of(n);
  Buffer o(run.be, DType::f32, n), po(run.be, DType::f32, n);
  const Work scan_ours = [&] { tandem::inclusive_scan(x, o); };
  if (run.scan_peer.empty()) {
    const double ms = paired_ms(run.be, run.reps, scan_ours, {}).first;
    rows.push_back({group, "inclusive_scan f32 (1 read + 1 write)", "GB/s", 2 * gb / ms * 1e3, 0, "", 0});
    return;
  }
  const Work peer = [&] { tandem::inclusive_scan(x, po, Queue{}, parse_scan_variant(run.scan_peer)); };
  auto [ms, peer_ms] = paired_ms(run.be, run.reps, scan_ours, peer);
  // The same bytes moved by the device copy (1 read + 1 write): the roofline the scan is judged
  // against as well (CUB reaches about 75% of it on Hopper).
  Buffer copied(run.be, DType::f32, n);
  auto [scan_ms, copy_ms] = paired_ms(run.be, run.reps, scan_ours, [&] { copy(x, copied); });
  // The last partial sums: within rounding of the running magnitude.
  const std::size_t tail = std::min<std::size_t>(n, 1024);
  Buffer ot = o.slice(n - tail, tail), pt = po.slice(n - tail, tail);
  expect_close("inclusive_scan at " + group, ot.to_vector<float>(), pt.to_vector<float>(), 1e-6, magnitude);
  rows.push_back({group, "inclusive_scan f32 (1 read + 1 write)", "GB/s", 2 * gb / ms * 1e3, 2 * gb / peer_ms * 1e3,
                  run.scan_peer, 1.00});
  rows.push_back({group, "inclusive_scan f32, against the copy", "GB/s", 2 * gb / scan_ms * 1e3, 2 * gb / copy_ms * 1e3,
                  "device copy", 0});
  for (const std::string& v : scan_variant_names(run.be)) {
    if (v == "single_block" || v == run.scan_peer) continue;  // one block for 2^28: minutes
    auto [v_ms, v_peer_ms] = paired_ms(
        run.be, run.reps, [&] { tandem::inclusive_scan(x, o, Queue{}, parse_scan_variant(v)); }, peer);
    expect_close("inclusive_scan " + v + " at " + group, ot.to_vector<float>(), pt.to_vector<float>(), 1e-6, magnitude);
    rows.push_back({group, "inclusive_scan f32, variant " + v, "GB/s", 2 * gb / v_ms * 1e3, 2 * gb / v_peer_ms * 1e3,
                    run.scan_peer, 0});
  }
}

// sum against the vendor's reduce at 2^28 and 2^30, inclusive_scan against its scan at 2^28.
void measure_sum_scan(const Run& run, std::vector<Row>& rows) {
  std::vector<std::size_t> sum_sizes =
      run.tiny ? std::vector<std::size_t>{std::size_t(1) << 14} : std::vector<std::size_t>{std::size_t(1) << 28};
  if (!run.tiny && !run.quick) sum_sizes.push_back(std::size_t(1) << 30);
  for (std::size_t n : sum_sizes) {
    std::vector<float> h = random_floats(n, 3);
    double magnitude = 0;
    for (float v : h) magnitude += std::fabs(v);
    Buffer x = Buffer::from(run.be, h);
    h = {};
    measure_sum(run, x, n, magnitude, rows);
    if (n > (std::size_t(1) << 28)) continue;  // the scan at 2^28 (two 1 GB arrays)
    measure_scan(run, x, n, magnitude, rows);
  }
}

// A matmul measured: its dtype, N (N x N times N x N) and tiers.
struct Gemm {
  DType type;
  std::int64_t n;
  std::vector<MatmulTier> tiers;  // the first one carries the target
};

// One matmul's rows: each tier against the peer tier, the results compared; with `tiles`,
// register_blocked f32 at both block tiles of tandem's GPU kernel too.
void measure_gemm(const Run& run, const Gemm& g, bool tiles, std::vector<Row>& rows) {
  const std::int64_t N = g.n;
  const std::size_t nn = static_cast<std::size_t>(N * N);
  Buffer a32 = Buffer::from(run.be, random_floats(nn, 4)), b32 = Buffer::from(run.be, random_floats(nn, 5));
  Buffer a = a32, b = b32;
  if (g.type != DType::f32) {
    a = Buffer(run.be, g.type, nn);
    b = Buffer(run.be, g.type, nn);
    convert(a32, a);
    convert(b32, b);
  }
  a32 = Buffer();
  b32 = Buffer();
  Buffer c(run.be, DType::f32, nn), pc(run.be, DType::f32, nn);
  Matrix am = matrix(a, N, N), bm = matrix(b, N, N), cm = matrix(c, N, N), pcm = matrix(pc, N, N);
  bool transposed_b = false;  // B as B^T, on both sides
  auto on_tier = [&](MatmulTier tier, Matrix& out) {
    return Work([&, tier] {
      MatmulOptions o;
      o.tier = tier;
      o.trans_b = transposed_b ? Transpose::yes : Transpose::no;
      matmul(am, bm, out, o);
    });
  };
  const double gflop = 2.0 * double(N) * double(N) * double(N) / 1e9;
  const std::string group =
      std::string(g.type == DType::f32 ? "sgemm" : name_of(g.type)) + " " + std::to_string(N) + "^3";
  // tier against the peer tier (r pairs), c against pc: a row `name`.
  auto versus_peer = [&](MatmulTier tier, int r, const std::string& what, const std::string& name, double target) {
    auto [ms, peer_ms] = paired_ms(run.be, r, on_tier(tier, cm), on_tier(run.peer_tier, pcm));
    // Inputs in [-1, 1]: every product's error is within k * eps(f32) of k; with f32
    // accumulation in any order, 1e-4 * N bounds it at these sizes.
    expect_close(group + " " + what, c.to_vector<float>(), pc.to_vector<float>(), 1e-4, double(N));
    rows.push_back({group, name, "GFLOP/s", gflop / ms * 1e3, gflop / peer_ms * 1e3, run.peer_label, target});
  };
  const bool vendor = has_tier(run.be, g.type, run.peer_tier);
  for (std::size_t i = 0; i < g.tiers.size(); ++i) {
    const MatmulTier tier = g.tiers[i];
    const int r = tier == MatmulTier::naive ? std::min(run.reps, 3) : run.reps;
    if (!vendor) {
      const double ms = paired_ms(run.be, r, on_tier(tier, cm), {}).first;
      rows.push_back({group, std::string(name_of(tier)), "GFLOP/s", gflop / ms * 1e3, 0, "", 0});
      continue;
    }
    const std::string name(name_of(tier));
    versus_peer(tier, r, name, name, i == 0 ? 0.80 : 0);
    if (tier == MatmulTier::tensor_core && (g.type == DType::bf16 || g.type == DType::f16) &&
        std::getenv("TANDEM_GPU_TENSOR_KERNEL") == nullptr &&
        (run.backend.rfind("cuda", 0) == 0 || run.backend.rfind("sim", 0) == 0)) {
      // The Hopper kernel (opt-in) at both tiles, B as it is (N-major to wgmma) and transposed
      // (K-major), the peer given the same layout, where this build and device have it.
      bool refused = false;  // said once
      for (const bool transposed : {false, true}) {
        transposed_b = transposed;
        for (const char* kernel : {"wgmma", "wgmma_128"}) {
          if (refused) break;
          setenv("TANDEM_GPU_TENSOR_KERNEL", kernel, 1);
          const std::string shape = std::string(kernel) == "wgmma" ? "128 x 256" : "128 x 128";
          try {
            versus_peer(tier, r, std::string("tensor_core ") + kernel + (transposed ? " B^T" : ""),
                        "tensor_core, wgmma " + shape + (transposed ? ", B transposed on both sides" : ""), 0);
          } catch (const Unsupported& e) {
            std::printf("(the wgmma kernel is not measured: %s)\n", e.what());
            refused = true;
          }
        }
      }
      transposed_b = false;
      unsetenv("TANDEM_GPU_TENSOR_KERNEL");
    }
    if (tier == MatmulTier::register_blocked && g.type == DType::f32 && tiles) {
      // Both block tiles of tandem's GPU kernel, whichever the default picked above.
      for (const char* tile : {"64", "128"}) {
        setenv("TANDEM_GPU_GEMM_TILE", tile, 1);
        versus_peer(tier, r, std::string("register_blocked ") + tile,
                    std::string("register_blocked, ") + tile + " x " + tile + " tiles", 0);
        unsetenv("TANDEM_GPU_GEMM_TILE");
      }
    }
  }
}

// sgemm tiers against the vendor tier at 4096^3; bf16 and f16 tensor_core at 8192^3 where the backend has it.
void measure_gemms(const Run& run, std::vector<Row>& rows) {
  const std::int64_t sgemm_n = run.tiny ? 64 : 4096, bf16_n = run.tiny ? 64 : (run.quick ? 4096 : 8192);
  std::vector<Gemm> gemms = {
      {DType::f32, sgemm_n, {MatmulTier::register_blocked, MatmulTier::tiled, MatmulTier::naive}}};
  if (has_tier(run.be, DType::bf16, MatmulTier::tensor_core)) {
    gemms.push_back({DType::bf16, bf16_n, {MatmulTier::tensor_core, MatmulTier::register_blocked}});
  }
  if (has_tier(run.be, DType::f16, MatmulTier::tensor_core))
    gemms.push_back({DType::f16, bf16_n, {MatmulTier::tensor_core}});
  // TANDEM_GPU_GEMM_TILE picks the register_blocked block tile of the cuda, hip and sim backends.
  const bool gpu_gemm_tiles =
      (run.backend.rfind("cuda", 0) == 0 || run.backend.rfind("hip", 0) == 0 || run.backend.rfind("sim", 0) == 0) &&
      std::getenv("TANDEM_GPU_GEMM_TILE") == nullptr;
  for (const Gemm& g : gemms) measure_gemm(run, g, gpu_gemm_tiles, rows);
}

// add end to end from pinned memory (x from pinned, y from hy, the sum into pinned_back): in order
// on one queue, against 8 chunks on two queues; each way's result checked against want.
void measure_overlap(const Run& run, HostBuffer& pinned, HostBuffer& hy, HostBuffer& pinned_back,
                     const std::vector<float>& want, std::vector<Row>& rows) {
  Backend& be = run.be;
  const std::size_t n = want.size();
  Buffer x(be, DType::f32, n), y(be, DType::f32, n), out(be, DType::f32, n);
  auto in_order = [&] {
    be.copy_to_device_async(Queue{}, x.data(), pinned.data(), x.bytes());
    be.copy_to_device_async(Queue{}, y.data(), hy.data(), y.bytes());
    add(x, y, out);
    be.copy_to_host_async(Queue{}, pinned_back.data(), out.data(), out.bytes());
  };
  constexpr std::size_t chunks = 8;
  auto overlapped = [&] {
    const Queue queues[2] = {Queue{}, be.transfer_queue()};
    for (std::size_t c = 0; c < chunks; ++c) {
      const Queue q = queues[c % 2];
      const std::size_t from = n * c / chunks, count = n * (c + 1) / chunks - from;
      const std::size_t at = from * sizeof(float), bytes = count * sizeof(float);
      Buffer xc = x.slice(from, count), yc = y.slice(from, count), oc = out.slice(from, count);
      be.copy_to_device_async(q, xc.data(), static_cast<char*>(pinned.data()) + at, bytes);
      be.copy_to_device_async(q, yc.data(), static_cast<char*>(hy.data()) + at, bytes);
      add(xc, yc, oc, q);
      be.copy_to_host_async(q, static_cast<char*>(pinned_back.data()) + at, oc.data(), bytes);
    }
    be.synchronize(queues[1]);
  };
  // Each way's output filled with NaN before it runs.
  auto result = [&] { return std::vector<float>(pinned_back.span<float>().begin(), pinned_back.span<float>().end()); };
  auto poison = [&] { std::fill(pinned_back.span<float>().begin(), pinned_back.span<float>().end(), NAN); };
  poison();
  const double serial_ms = median_host_ms(be, run.reps, in_order);
  expect_close("add end to end, in order", result(), want, 0, 1);
  poison();
  const double overlap_ms = median_host_ms(be, run.reps, overlapped);
  expect_close("add end to end, 8 chunks on 2 queues", result(), want, 0, 1);
  const double gb = gb_of(n);
  rows.push_back({"transfers", "add end to end, 8 chunks on 2 queues (vs in order)", "GB/s", 3 * gb / overlap_ms * 1e3,
                  3 * gb / serial_ms * 1e3, "in order", 0});
}

// Host <-> device bandwidth, pinned against pageable, at 256 MB; then add end to end overlapped.
void measure_transfers(const Run& run, std::vector<Row>& rows) {
  Backend& be = run.be;
  const std::size_t n = run.tiny ? (std::size_t(1) << 14) : (std::size_t(1) << 26);  // 256 MB
  const double gb = gb_of(n);
  const std::string group = "transfers";
  std::vector<float> pageable = random_floats(n, 6), back(n);
  HostBuffer pinned(be, DType::f32, n), pinned_back(be, DType::f32, n);
  std::copy(pageable.begin(), pageable.end(), pinned.span<float>().begin());
  Buffer d(be, DType::f32, n);
  const double up_pageable = median_host_ms(be, run.reps, [&] { d.upload(pageable); });
  const double up_pinned =
      median_host_ms(be, run.reps, [&] { be.copy_to_device_async(Queue{}, d.data(), pinned.data(), d.bytes()); });
  const double down_pageable = median_host_ms(be, run.reps, [&] { d.download(std::span<float>(back)); });
  const double down_pinned =
      median_host_ms(be, run.reps, [&] { be.copy_to_host_async(Queue{}, pinned_back.data(), d.data(), d.bytes()); });
  rows.push_back({group, "host -> device, pinned (vs pageable)", "GB/s", gb / up_pinned * 1e3, gb / up_pageable * 1e3,
                  "pageable", 0});
  rows.push_back({group, "device -> host, pinned (vs pageable)", "GB/s", gb / down_pinned * 1e3,
                  gb / down_pageable * 1e3, "pageable", 0});

  // y is x reversed; the sum is checked against x + y on the host.
  HostBuffer hy(be, DType::f32, n);
  std::copy(pageable.rbegin(), pageable.rend(), hy.span<float>().begin());
  std::vector<float> want(n);
  for (std::size_t i = 0; i < n; ++i) want[i] = pageable[i] + pageable[n - 1 - i];
  measure_overlap(run, pinned, hy, pinned_back, want, rows);
}

// Prints the rows and what could not be measured, and writes the JSON where asked; returns the
// exit code.
int report(const Run& run, const DeviceProperties& props, const Args& args, const std::vector<Row>& rows) {
  const char* backend = run.backend.c_str();
  const std::string& json_path = args.json_path;
  std::string sections;  // "" for all
  for (const std::string& section : args.only) sections += (sections.empty() ? "" : ",") + section;
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::printf("tandem GPU benchmark, backend %s (%s), %s%s%s\n", backend, props.name.c_str(), date,
              sections.empty() ? "" : (", only " + sections).c_str(),
              run.tiny ? " (a simulator: tiny sizes, the timings mean nothing)" : "");
  bench::print_targets(rows, !run.tiny);
  if (run.reduce_peer.empty())
    std::printf("(no vendor reduce or scan on %s: those ratios are not available)\n", backend);
  if (!has_tier(run.be, DType::f32, run.peer_tier)) {
    std::printf("(no vendor matmul on %s: the matmul ratios are not available)\n", backend);
  }
  if (!has_tier(run.be, DType::bf16, MatmulTier::tensor_core)) {
    std::printf("(no tensor_core tier on %s: the bf16 rows are not measured)\n", backend);
  }

  if (!json_path.empty()) {
    const std::string header = "\"backend\": \"" + run.backend + "\", \"device\": \"" + props.name +
                               "\", \"date\": \"" + date + "\", \"quick\": " + (run.quick ? "true" : "false") +
                               ", \"sections\": \"" + (sections.empty() ? "all" : sections) + "\"";
    if (!bench::write_targets_json(json_path, header, rows, !run.tiny)) {
      std::fprintf(stderr, "tandem_bench_gpu: cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  const int exit_code = parse_args(argc, argv, args);
  if (exit_code >= 0) return exit_code;
  try {
    Backend& be = get_backend(args.backend);
    const DeviceProperties props = be.properties();
    if (props.kind == BackendKind::cpu) {
      std::fprintf(stderr, "tandem_bench_gpu: '%s' is a CPU backend; tandem_bench_cpu measures those\n",
                   args.backend.c_str());
      return 2;
    }
    const Run run = plan_run(be, props, args);
    std::vector<Row> rows;
    if (args.wants("add")) measure_add(run, rows);
    if (args.wants("reduce")) measure_sum_scan(run, rows);
    if (args.wants("matmul")) measure_gemms(run, rows);
    if (args.wants("transfers")) measure_transfers(run, rows);
    return report(run, props, args, rows);
  } catch (const WrongResult& e) {
    std::fprintf(stderr, "tandem_bench_gpu: WRONG RESULT: %s (the timings would describe a wrong answer)\n", e.what());
    return 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "tandem_bench_gpu: %s\n", e.what());
    return 1;
  }
}
