// CPU benchmark: the openmp backend against the peers measured in the same run, with the CPU
// targets checked that peers in this process can judge (NumPy's and PyTorch's rows of the same
// targets come from bench/cpu_peers.py, which runs this program and them in alternating rounds):
//   sum, dot, norm2, max >= 100% of OpenMP's own `reduction` loop over the same data, and
//                           >= 70% of the copy bandwidth (bytes read: the roofline);
//   scan                 >= 75% of the copy bandwidth;
//   add, axpy            >= 90% of the triad bandwidth (STREAM's a = b + s c, 3 arrays moved);
//   sgemm, best tier     >= 100% of OpenBLAS (a current core: see current_openblas) at N = 1024,
//                           2048, 4096, and 2 threads >= 1.8x 1 thread.
// Peers: copy is the best of the backend's copy, a STREAM-style `omp parallel
// for simd` copy loop and streaming-store copies in 1, 2 and 4 interleaved runs per thread; triad
// the best of a STREAM loop, the same loop with streaming stores, and that in 1, 2 and 4
// interleaved runs per thread; an `omp parallel for simd reduction` sum; OpenBLAS sgemm (the
// vendor tier). Each sgemm size also reports the tier and OpenBLAS as shares of the CPU's
// multiply-add roof, measured at the micro-kernel's vector width (fma_peak.hpp).
// Arrays are 256 MB (64 Mi floats), far past every cache. Each op is timed alternately with its
// peer (op, peer, op, peer, ...) and the ratio is of the two medians: on a shared VM whose speed
// drifts, a peer measured minutes earlier would not be a fair comparison.
// Not a test: it asserts nothing, and exits 0 whether or not a target is met.
#include <omp.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "fma_peak.hpp"
#include "tandem/tandem.hpp"

using namespace tandem;

namespace {

using Row = bench::TargetRow;

using Clock = std::chrono::steady_clock;

// Medians (seconds) of each of `works` timed in turns, after one warm-up call of each. With
// `settle`, each call starts after a pause of kSettle: for peers on another thread pool than
// OpenMP's (a pthreads OpenBLAS). Each pool's idle threads spin for a while after their work, and
// on 2 vCPUs they took the cores from the other pool's threads. Alternating sgemm at N = 1024, in
// GFLOP/s (register_blocked / OpenBLAS): no pause 133 / 80, 20 ms 37 / 112 (OpenBLAS's threads
// spin longer), 200 ms 130 / 113. Peers on OpenMP's own pool (the copy, triad and reduction
// loops, an OpenMP build of OpenBLAS) run without it, as the ops do: the pause would time every
// call from a sleeping team, which NumPy's and PyTorch's timings (cpu_peers.py) do not.
constexpr auto kSettle = std::chrono::milliseconds(250);
std::vector<double> seconds_in_turns(int reps, const std::vector<std::function<void()>>& works, bool settle = false) {
  for (const auto& w : works) w();
  std::vector<std::vector<double>> times(works.size());
  for (int r = 0; r < reps; ++r) {
    for (std::size_t which = 0; which < works.size(); ++which) {
      if (settle) std::this_thread::sleep_for(kSettle);
      const auto t0 = Clock::now();
      works[which]();
      times[which].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
  }
  std::vector<double> medians;
  for (auto& t : times) {
    std::sort(t.begin(), t.end());
    medians.push_back(t[t.size() / 2]);
  }
  return medians;
}
// The same for an op and its peer.
std::pair<double, double> paired_seconds(int reps, const std::function<void()>& op, const std::function<void()>& peer,
                                         bool settle = false) {
  const std::vector<double> s = seconds_in_turns(reps, {op, peer}, settle);
  return {s[0], s[1]};
}

// The peers on raw arrays of n floats.
void stream_copy(std::int64_t n, const float* a, float* b) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) b[i] = a[i];
}
void stream_triad(std::int64_t n, float* a, const float* b, const float* c, float s) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}
#if defined(__SSE2__)
// The same triad writing around the caches (a is 16-byte aligned: tandem buffers are).
void stream_triad_nt(std::int64_t n, float* a, const float* b, const float* c, float s) {
  const __m128 vs = _mm_set1_ps(s);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n / 4 * 4; i += 4) {
    _mm_stream_ps(a + i, _mm_add_ps(_mm_loadu_ps(b + i), _mm_mul_ps(vs, _mm_loadu_ps(c + i))));
  }
  _mm_sfence();
  for (std::int64_t i = n / 4 * 4; i < n; ++i) a[i] = b[i] + s * c[i];
}
// And with `runs` runs per thread interleaved a cache line at a time (more requests in flight),
// as the openmp backend's own large outputs are: which count is best differs by CPU (four on the
// Xeon VM, one or two on the EPYC VM, where four moved a third), so the peers are the best of
// each. value(i) gives out[i, i + 4).
template <class F>
void streamed_runs(std::int64_t n, float* out, std::int64_t runs, F value) {
  const std::int64_t lines = n / 16;
#pragma omp parallel
  {
    const std::int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
    const std::int64_t first = lines * me / threads, last = lines * (me + 1) / threads, run = (last - first) / runs;
    auto line = [&](std::int64_t l) {
      for (std::int64_t i = l * 16; i < l * 16 + 16; i += 4) _mm_stream_ps(out + i, value(i));
    };
    for (std::int64_t j = 0; j < run; ++j) {
      for (std::int64_t r = 0; r < runs; ++r) line(first + r * run + j);
    }
    for (std::int64_t l = first + runs * run; l < last; ++l) line(l);
    _mm_sfence();
  }
}
void stream_triad_nt_runs(std::int64_t n, float* a, const float* b, const float* c, float s, std::int64_t runs) {
  const __m128 vs = _mm_set1_ps(s);
  streamed_runs(n, a, runs,
                [=](std::int64_t i) { return _mm_add_ps(_mm_loadu_ps(b + i), _mm_mul_ps(vs, _mm_loadu_ps(c + i))); });
  for (std::int64_t i = n / 16 * 16; i < n; ++i) a[i] = b[i] + s * c[i];
}
void stream_copy_nt_runs(std::int64_t n, const float* a, float* b, std::int64_t runs) {
  streamed_runs(n, b, runs, [=](std::int64_t i) { return _mm_loadu_ps(a + i); });
  for (std::int64_t i = n / 16 * 16; i < n; ++i) b[i] = a[i];
}
#endif
// OpenMP's own reductions: what a user writes without a library.
float omp_reduction_sum(std::int64_t n, const float* x) {
  float s = 0;
#pragma omp parallel for simd reduction(+ : s) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}
float omp_reduction_dot(std::int64_t n, const float* x, const float* y) {
  float s = 0;
#pragma omp parallel for simd reduction(+ : s) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}
float omp_reduction_norm2(std::int64_t n, const float* x) {
  float s = 0;
#pragma omp parallel for simd reduction(+ : s) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) s += x[i] * x[i];
  return std::sqrt(s);
}
float omp_reduction_max(std::int64_t n, const float* x) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp parallel for simd reduction(max : m) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

using Work = std::function<void()>;

// The memory-bound rows' arrays: 64 Mi floats each (256 MB), far past every cache.
constexpr std::size_t kArrayFloats = std::size_t(64) << 20;
constexpr auto kArrayCount = static_cast<std::int64_t>(kArrayFloats);
constexpr double kArrayGb = double(kArrayFloats) * 4 / 1e9;  // one array
struct Arrays {
  Buffer x, y, out, r;
  float *px = nullptr, *py = nullptr, *po = nullptr;  // x, y and out
};

// Two ways of a peer timed against each other in turns, a row each (`arrays`: arrays moved per
// call); returns the faster, and its time in best_s.
Work faster_of(int reps, double arrays, const std::string& name_a, const Work& a, const std::string& name_b,
               const Work& b, double& best_s, std::vector<Row>& rows) {
  const auto [a_s, b_s] = paired_seconds(reps, a, b);
  rows.push_back({"peer", name_a, "GB/s", arrays * kArrayGb / a_s, 0, "", 0});
  rows.push_back({"peer", name_b, "GB/s", arrays * kArrayGb / b_s, 0, "", 0});
  best_s = std::min(a_s, b_s);
  return a_s <= b_s ? a : b;
}

#if defined(__SSE2__)
// The streaming-store way of a peer in 1, 2 and 4 interleaved runs per thread, a row each; one
// faster than best_s replaces peer.
void try_interleaved_runs(int reps, const std::string& what, double arrays,
                          const std::function<Work(std::int64_t)>& with_runs, double best_s, Work& peer,
                          std::vector<Row>& rows) {
  for (const std::int64_t runs : {1, 2, 4}) {
    const double t = bench::median_seconds(reps, with_runs(runs));
    rows.push_back({"peer", what + ": streaming stores, " + std::to_string(runs) + " interleaved run(s) per thread",
                    "GB/s", arrays * kArrayGb / t, 0, "", 0});
    if (t < best_s) {
      best_s = t;
      peer = with_runs(runs);
    }
  }
}
#endif

// Which copy is fastest here (each a row): the backend's own, the STREAM loop, streaming stores.
Work fastest_copy(int reps, Arrays& a, std::vector<Row>& rows) {
  float *px = a.px, *po = a.po;
  double best_s = 0;
  Work peer = faster_of(
      reps, 2, "copy: openmp copy (tandem's own)", [&a] { copy(a.x, a.out); },
      "copy: STREAM loop (omp parallel for simd)", [=] { stream_copy(kArrayCount, px, po); }, best_s, rows);
#if defined(__SSE2__)
  try_interleaved_runs(
      reps, "copy", 2, [=](std::int64_t runs) { return Work([=] { stream_copy_nt_runs(kArrayCount, px, po, runs); }); },
      best_s, peer, rows);
#endif
  return peer;
}

// Which triad is fastest here (each a row): the STREAM loop, with streaming stores, interleaved.
Work fastest_triad(int reps, const Arrays& a, std::vector<Row>& rows) {
  float *px = a.px, *py = a.py, *po = a.po;
  Work peer = [=] { stream_triad(kArrayCount, po, px, py, 0.5f); };
#if defined(__SSE2__)
  double best_s = 0;
  peer = faster_of(
      reps, 3, "triad: STREAM loop", peer, "triad: STREAM loop, streaming stores",
      [=] { stream_triad_nt(kArrayCount, po, px, py, 0.5f); }, best_s, rows);
  try_interleaved_runs(
      reps, "triad", 3,
      [=](std::int64_t runs) { return Work([=] { stream_triad_nt_runs(kArrayCount, po, px, py, 0.5f, runs); }); },
      best_s, peer, rows);
#else
  (void)reps;
  (void)rows;
#endif
  return peer;
}

// The memory-bound rows: each op against the copy or triad peer (or the omp reduction), in turns.
void measure_memory(Backend& be, int reps, std::vector<Row>& rows) {
  std::vector<float> h(kArrayFloats);
  for (std::size_t i = 0; i < kArrayFloats; ++i) h[i] = float(i % 1000) * 1e-3f - 0.5f;
  Arrays a{.x = Buffer::from(be, h),
           .y = Buffer::from(be, h),
           .out = Buffer(be, DType::f32, kArrayFloats),
           .r = Buffer(be, DType::f32, 1)};
  h = {};
  a.px = static_cast<float*>(a.x.data());
  a.py = static_cast<float*>(a.y.data());
  a.po = static_cast<float*>(a.out.data());
  const Work copy_peer = fastest_copy(reps, a, rows);
  const Work triad_peer = fastest_triad(reps, a, rows);
  volatile float sink = 0;
  Buffer &x = a.x, &y = a.y, &out = a.out, &r = a.r;

  // op against a peer: arrays_moved arrays (256 MB each) per call of op, peer_arrays per call of peer.
  // Against OpenMP's reduction loops, which read at the same bandwidth, the peer is timed twice in
  // each turn: how far the loop lies from itself is the spread a ratio near 1 is read against.
  auto mem_row = [&](const std::string& name, double arrays_moved, const Work& op, const std::string& peer_name,
                     double peer_arrays, const Work& peer, double target) {
    const bool again = peer_name == "omp reduction";
    // (Peer, op, peer: each timing of the peer beside one of the op's.)
    const std::vector<double> s = again ? seconds_in_turns(reps, {peer, op, peer}) : seconds_in_turns(reps, {op, peer});
    const double op_s = again ? s[1] : s[0], peer_s = again ? s[0] : s[1];
    Row row{"memory", name, "GB/s", arrays_moved * kArrayGb / op_s, peer_arrays * kArrayGb / peer_s, peer_name, target};
    if (again) row.peer_again = peer_arrays * kArrayGb / s[2];
    rows.push_back(row);
  };
  mem_row(
      "sum f32 (1 read)", 1, [&] { reduce(ReduceOp::sum, x, r); }, "copy", 2, copy_peer, 0.70);
  mem_row(
      "dot f32 (2 reads)", 2, [&] { dot(x, y, r); }, "copy", 2, copy_peer, 0.70);
  mem_row(
      "norm2 f32 (1 read)", 1, [&] { reduce(ReduceOp::norm2, x, r); }, "copy", 2, copy_peer, 0.70);
  mem_row(
      "inclusive_scan f32 (1 read + 1 write)", 2, [&] { inclusive_scan(x, out); }, "copy", 2, copy_peer, 0.75);
  mem_row(
      "add f32 (2 reads + 1 write)", 3, [&] { add(x, y, out); }, "triad", 3, triad_peer, 0.90);
  mem_row(
      "axpy f32 (2 reads + 1 write)", 3, [&] { axpy(1e-3, x, y); }, "triad", 3, triad_peer, 0.90);
  mem_row(
      "scale f32 (1 read + 1 write)", 2, [&] { scale(2.0, x, out); }, "copy", 2, copy_peer, 0);
  mem_row(
      "relu f32 (1 read + 1 write)", 2, [&] { relu(x, out); }, "copy", 2, copy_peer, 0);
  mem_row(
      "max f32 (1 read)", 1, [&] { reduce(ReduceOp::max, x, r); }, "copy", 2, copy_peer, 0.70);
  mem_row(
      "sum f32 (1 read)", 1, [&] { reduce(ReduceOp::sum, x, r); }, "omp reduction", 1,
      [&] { sink = omp_reduction_sum(kArrayCount, a.px); }, 1.00);
  mem_row(
      "dot f32 (2 reads)", 2, [&] { dot(x, y, r); }, "omp reduction", 2,
      [&] { sink = omp_reduction_dot(kArrayCount, a.px, a.py); }, 1.00);
  mem_row(
      "norm2 f32 (1 read)", 1, [&] { reduce(ReduceOp::norm2, x, r); }, "omp reduction", 1,
      [&] { sink = omp_reduction_norm2(kArrayCount, a.px); }, 1.00);
  mem_row(
      "max f32 (1 read)", 1, [&] { reduce(ReduceOp::max, x, r); }, "omp reduction", 1,
      [&] { sink = omp_reduction_max(kArrayCount, a.px); }, 1.00);
  (void)sink;
}

// The vendor tier as tandem info says it: "OpenBLAS 0.3.21, SkylakeX kernels (AVX-512)", with
// ": older than this CPU's ..." where OpenBLAS chose kernels for an older CPU.
std::string vendor_tier(const DeviceProperties& p) {
  for (const auto& [what, how] : p.tuning) {
    if (what == "vendor tier") return how;
  }
  return "";
}

// The library and its kernels, without the warning (": older than ...") or the threading note
// ("; OpenMP build ..."): the peer's name in the rows.
std::string vendor_name(const std::string& vendor) { return vendor.substr(0, vendor.find_first_of(":;")); }

// An OpenBLAS older than the CPU model runs kernels for an older ISA (0.3.21 runs SSE3 kernels
// on an AVX-512 Xeon it does not know): a peer at a fraction of the machine. Unless the caller
// chose OPENBLAS_CORETYPE, the benchmark runs again with it naming a core of the CPU's ISA, so
// that the sgemm peer is a current one; the first line says so, and says when it did not help.
void current_openblas(char** argv, const std::string& vendor, bool caller_tuning) {
  const std::size_t older = vendor.find("older than this CPU's ");
  if (older == std::string::npos) return;
  if (const char* forced = std::getenv("OPENBLAS_CORETYPE"); forced != nullptr) {
    std::printf("with OPENBLAS_CORETYPE=%s OpenBLAS still runs kernels older than this CPU (a build without "
                "DYNAMIC_ARCH ignores the variable): the sgemm peer is %s\n",
                forced, vendor_name(vendor).c_str());
    return;
  }
  const std::string isa = vendor.substr(older + 22);
  const char* core = isa.rfind("AVX-512", 0) == 0 ? "SkylakeX" : isa.rfind("AVX2", 0) == 0 ? "Haswell" : "SandyBridge";
  std::printf("OpenBLAS chose kernels older than this CPU (%s); running again with OPENBLAS_CORETYPE=%s so that the "
              "sgemm peer is a current one\n",
              vendor_name(vendor).c_str(), core);
  std::fflush(stdout);
  setenv("OPENBLAS_CORETYPE", core, 1);
  if (!caller_tuning) setenv("TANDEM_TUNING", "auto", 1);  // the calibration just made is cached: not again
  execv("/proc/self/exe", argv);
  std::printf("(could not run again: the peer stays the older kernels)\n");  // execv returns only on failure
}

// The ISA of the f32 GEMM micro-kernel ("avx512", "avx2", "generic"), as the backend reports it.
std::string microkernel_isa(const DeviceProperties& p) {
  for (const std::string& f : p.isa_features) {
    if (f.rfind("microkernel:", 0) == 0) return f.substr(12);
  }
  return "generic";
}

// The sgemm rows at one size: each of our tiers against OpenBLAS (where built), and 2 threads vs 1.
void measure_sgemm(Backend& be, std::int64_t N, bool quick, const std::string& peer_name, bool settle,
                   std::vector<Row>& rows) {
  const bool have_vendor = !peer_name.empty();
  const std::size_t nn = static_cast<std::size_t>(N * N);
  std::vector<float> ha(nn), hb(nn);
  for (std::size_t i = 0; i < nn; ++i) {
    ha[i] = float((i * 7) % 13) * 0.1f - 0.6f;
    hb[i] = float((i * 5) % 11) * 0.1f - 0.5f;
  }
  Buffer a = Buffer::from(be, ha), b = Buffer::from(be, hb), c(be, DType::f32, nn);
  Matrix am = matrix(a, N, N), bm = matrix(b, N, N), cm = matrix(c, N, N);
  const double gflop = 2.0 * double(N) * double(N) * double(N) / 1e9;
  auto run = [&](MatmulTier tier) {
    return [&, tier] {
      MatmulOptions o;
      o.tier = tier;
      matmul(am, bm, cm, o);
    };
  };
  const std::string group = "sgemm N=" + std::to_string(N);
  // Five pairs at every size (4096^3 had three): on the shared Zen 3 VM the 4096^3 ratio ran at
  // 81-128% of OpenBLAS over 49 runs of three, a fast phase of the machine during the peer's
  // turns enough to move it by ten points; the median of five lets one such turn pass.
  const int matmul_reps = quick ? 3 : 5;
  std::vector<MatmulTier> ours = {MatmulTier::register_blocked};
  if (N == 1024) ours.insert(ours.end(), {MatmulTier::tiled, MatmulTier::naive});
  for (MatmulTier tier : ours) {
    const bool best = tier == MatmulTier::register_blocked;
    if (have_vendor) {
      const auto [s, peer_s] =
          paired_seconds(tier == MatmulTier::naive ? 1 : matmul_reps, run(tier), run(MatmulTier::vendor), settle);
      rows.push_back(
          {group, std::string(name_of(tier)), "GFLOP/s", gflop / s, gflop / peer_s, peer_name, best ? 1.00 : 0});
    } else {
      const double s = bench::median_seconds(matmul_reps, run(tier));
      rows.push_back({group, std::string(name_of(tier)), "GFLOP/s", gflop / s, 0, "", 0});
    }
  }
  // The multiply-add roof at the micro-kernel's width, measured now, beside the tier and its peer:
  // where both stand near it, the ratio between them is the machine's noise.
  const double roof = bench::fma_roof_gflops(microkernel_isa(be.properties()));
  const Row ours_row = rows[rows.size() - ours.size()];  // register_blocked, the first of ours
  rows.push_back({group, "register_blocked vs the FMA roof", "GFLOP/s", ours_row.value, roof, "FMA roof", 0});
  if (have_vendor) rows.push_back({group, peer_name + " vs the FMA roof", "GFLOP/s", ours_row.peer, roof, "FMA roof", 0});
  // Scaling from 1 to 2 threads, the two timed in turns (omp_set_num_threads on this thread).
  const int threads = omp_get_max_threads();
  if (threads >= 2) {
    auto on = [&](int t) {
      return [&, t] {
        omp_set_num_threads(t);
        run(MatmulTier::register_blocked)();
        omp_set_num_threads(threads);
      };
    };
    const auto [two_s, one_s] = paired_seconds(matmul_reps, on(2), on(1));
    rows.push_back(
        {group, "register_blocked on 2 threads", "GFLOP/s", gflop / two_s, gflop / one_s, "itself on 1 thread", 1.8});
  }
}

// Prints the machine, the tuning, the rows and the stolen time, and writes the JSON where asked;
// returns the exit code.
int report(const DeviceProperties& props, const std::vector<Row>& rows, const bench::CpuTicks& ticks_at_start,
           bool have_vendor, const std::string& json_path) {
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::printf("tandem CPU benchmark, %s, %s, %d threads, micro-kernel %s\n", props.name.c_str(), date,
              omp_get_max_threads(), props.isa_features.empty() ? "?" : props.isa_features.back().c_str());
  std::string tuning_json;
  for (const auto& [what, how] : props.tuning) {
    std::printf("tuning: %s: %s\n", what.c_str(), how.c_str());
    std::string escaped;
    for (char ch : how) escaped += ch == '"' || ch == '\\' ? std::string("\\") + ch : std::string(1, ch);
    tuning_json += (tuning_json.empty() ? "" : ", ") + ("\"" + what + "\": \"" + escaped + "\"");
  }
  bench::print_targets(rows, true);
  const double stolen = bench::stolen_percent(ticks_at_start, bench::cpu_ticks());
  std::printf("%s\n", bench::stolen_text(stolen).c_str());
  if (!have_vendor) std::printf("(no OpenBLAS in this build: sgemm ratios are not available)\n");
  if (!json_path.empty()) {
    char header[512];
    std::snprintf(header, sizeof header, "\"machine\": \"%s\", \"date\": \"%s\", \"threads\": %d, \"array_bytes\": %zu",
                  props.name.c_str(), date, omp_get_max_threads(), kArrayFloats * 4);
    const std::string head = std::string(header) + ", \"tuning\": {" + tuning_json +
                             "}, \"steal_percent\": " + (stolen < 0 ? std::string("null") : std::to_string(stolen));
    if (!bench::write_targets_json(json_path, head, rows, true)) {
      std::fprintf(stderr, "tandem_bench_cpu: cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bench::Options options;
  const int exit_code = bench::parse_options(
      argc, argv,
      "usage: tandem_bench_cpu [--quick] [--json FILE]\n"
      "  openmp against peers measured in the same run, with the CPU targets checked:\n"
      "  sum/dot/norm2/max vs OpenMP's own reduction loop (>= 100%) and the copy bandwidth (>= 70%),\n"
      "  scan vs copy, add/axpy vs triad bandwidth (256 MB arrays), sgemm tiers vs OpenBLAS (>= 100%)\n"
      "  at N = 1024, 2048, 4096 and 2 threads vs 1, each size beside the CPU's multiply-add roof\n"
      "  measured at the micro-kernel's vector width. NumPy and PyTorch on the same targets:\n"
      "  bench/cpu_peers.py. --quick: fewer repeats, no N = 4096.\n",
      options);
  if (exit_code >= 0) return exit_code;
  const bench::CpuTicks ticks_at_start = bench::cpu_ticks();
  const bool quick = options.quick;
  // The store tuning measured now, on the quiet machine a benchmark needs (and cached for later
  // runs), rather than whatever a busier moment cached; TANDEM_TUNING set by the caller wins.
  const bool caller_tuning = std::getenv("TANDEM_TUNING") != nullptr;
  setenv("TANDEM_TUNING", "calibrate", 0);
  Backend& be = get_backend("openmp");
  const DeviceProperties props = be.properties();
  const std::string vendor = vendor_tier(props);
  current_openblas(argv, vendor, caller_tuning);
  std::vector<Row> rows;
  measure_memory(be, quick ? 5 : 11, rows);

  const auto tiers = be.matmul_tiers(DType::f32);
  const bool have_vendor = std::find(tiers.begin(), tiers.end(), MatmulTier::vendor) != tiers.end();
  std::vector<std::int64_t> sizes = {1024, 2048};
  if (!quick) sizes.push_back(4096);
  const std::string peer = have_vendor ? vendor_name(vendor) : "";
  // OpenBLAS on a pool of its own (the pthreads build, or one that does not say) is timed apart.
  const bool settle = vendor.find("; OpenMP build") == std::string::npos &&
                      vendor.find("; sequential build") == std::string::npos;
  for (std::int64_t N : sizes) measure_sgemm(be, N, quick, peer, settle, rows);
  return report(props, rows, ticks_at_start, have_vendor, options.json_path);
}
