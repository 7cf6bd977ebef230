// openmp: the fast CPU backend. Elementwise ops and reductions run at memory bandwidth (several
// independent accumulators, vectorised, one chunk per thread); the scan is parallel and cache-blocked;
// matmul comes in tiers (see matmul.cpp).
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "../host/host_backend.hpp"
#include "microkernel.hpp"
#include "scan_isa.hpp"

namespace tandem::openmp {

// Below parallel_from() elements a loop runs on the calling thread: forking and joining the team
// costs more than the other threads save there. How much depends on the CPU, the team and how its
// threads wait, so it is measured on first use (an f32 add timed on one thread and on the team,
// 1K to 256K elements) and cached with the other tuning; the table's value under
// TANDEM_TUNING=table, or TANDEM_OPENMP_PARALLEL_FROM.
inline constexpr std::size_t kParallelFromTable = 1 << 15;
struct ParallelTuning {
  std::size_t from = kParallelFromTable;
  std::string source;    // "calibrated now", "cached in FILE", "table", the environment variable
  std::string measured;  // the team's time over one thread's at each size when calibrated, else ""
};
const ParallelTuning& parallel_tuning();
inline std::size_t parallel_from() { return parallel_tuning().from; }
// The smallest of `sizes` (ascending) from which the team took at most 0.9 of one thread's time,
// there and at every larger size; twice the largest when it never did.
std::size_t choose_parallel_from(const std::vector<std::size_t>& sizes, const std::vector<double>& one_thread,
                                 const std::vector<double>& team);

// A product size (m * n * k) from which a second way of running a matmul beats a first (the bf16
// tensor tier over the widening register_blocked tier). Measured on first use like the
// parallel threshold: square products of each edge timed both ways in rotating rounds, the best
// of three; chosen by choose_crossover; cached per CPU, team and wait policy. Under
// TANDEM_TUNING=table, or first needed inside a parallel region: the table's.
inline constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
struct Crossover {
  std::int64_t from = kNever;
  std::string source;    // as ParallelTuning's
  std::string measured;  // the second way's time over the first's at each edge when calibrated
};
struct CrossoverSpec {
  const char* kind;                        // the cache file's kind: "bf16-tensor"
  std::map<std::string, std::string> key;  // what else the entry is for (the engine, the kernels)
  std::vector<std::int64_t> edges;         // ascending; each a product of edge^3
  std::int64_t table;                      // the value without a measurement
  std::string ratio;                       // what measured's numbers are
  bool needs_team = false;                 // the two ways differ only on a team of two or more
};
// run(edge, second) runs the product of edge^3 once, the second way or the first.
Crossover resolve_crossover(const CrossoverSpec& spec, const std::function<void(std::int64_t, bool)>& run);
// The smallest of `sizes` (ascending) from which second took at most 0.9 of first's time, there
// and at every larger size; kNever when it did not at the largest.
std::int64_t choose_crossover(const std::vector<std::int64_t>& sizes, const std::vector<double>& first,
                              const std::vector<double>& second);
// From which product size the bf16 tensor_core tier is the automatic one (AMX table: 2^18, 64^3;
// AVX512-BF16: never).
const Crossover& bf16_tensor_tuning();

// The accumulator of sums and scans per element type: the type itself for floating point (f32
// lanes: the error bound gamma(n, u) holds for any order), wrapping unsigned for i32 (no UB).
template <class T>
struct SumAcc {
  using type = T;
};
template <>
struct SumAcc<std::int32_t> {
  using type = std::uint32_t;
};

// How many threads the backend's parallel regions use: all it was given (OMP_NUM_THREADS, else
// one per CPU), unless other programs want those cores too. A parallel region waits for its
// slowest thread, so one thread that waits for a core held by another program holds up the whole
// team for a time slice, at every region: an op of many short regions then runs slower than it
// would on fewer threads. So, every 20 ms or so, the team is checked: other programs' runnable
// tasks (the machine's in /proc/loadavg, less this process's own in /proc/self/task) take their
// cores out of it, down to one thread, once two checks in a row saw them (the second due at least
// 4 ms, or 20 checks' cost, after the first); it grows back at the first check that sees the
// cores free.
// OMP_NUM_THREADS from the user fixes it: no check, the team it gives.
class Team {
 public:
  explicit Team(int threads);
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;
  // The team size now (checks the machine when a check is due).
  int size();
  int threads() const { return threads_; }
  bool fixed() const { return fixed_; }
  // "2 of 2 threads", with why fewer where they are.
  std::string describe() const;

 private:
  // Reads the machine; true when this check wants fewer threads than the last (a shrink that
  // the next check confirms).
  bool check();
  const int threads_;
  const bool fixed_;
  std::atomic<int> size_;
  std::atomic<int> last_want_;  // the last check's team, for two in a row
  std::atomic<std::int64_t> next_check_ns_{0};
  std::atomic<bool> checking_{false};
};

// `threads` as the calling thread's OpenMP setting for a scope, the setting before it back after
// (inside a parallel region, or for threads <= 0, it does nothing).
class ThreadsScope {
 public:
  explicit ThreadsScope(int threads);
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;
  ~ThreadsScope();

 private:
  int before_ = 0;
  bool set_ = false;
};

// The tuning is measured, and its cache entries keyed, with the backend's whole team, whatever
// the busy-machine team is on the thread that first needs a tuning (inside an op, under a
// TeamScope): the backend records its thread count when made, and a tuning is first resolved
// under ThreadsScope(whole_team()).
void set_whole_team(int threads);
int whole_team();

// A backend operation's thread count: the team's on this thread for the op, at most the
// caller's own OpenMP setting, and that setting back after it (omp_set_num_threads changes only
// the calling thread's ICV).
class TeamScope {
 public:
  explicit TeamScope(Team& team);
  TeamScope(const TeamScope&) = delete;
  TeamScope& operator=(const TeamScope&) = delete;
  ~TeamScope();
  // The caller's setting (omp_get_max_threads() before the op).
  int caller_threads() const { return before_; }

 private:
  int before_ = 0;
  bool set_ = false;
};

// What every ISA's backend shares: the device, the copies, matmul and the tuning it reports. The
// elementwise, reduction, scan and softmax primitives are the ISA's own: each is implemented once
// in kernels.inl, compiled per ISA (kernels_<isa>.cpp: generic x86-64, AVX2 + FMA, AVX-512) as a
// final class deriving from this one, and make_openmp_backend makes the one of the widest ISA
// this CPU runs and TANDEM_CPU_ISA allows (kernels_isa()). Arguments were checked by the
// algorithms layer.
class OpenMPBackend : public host::HostBackend {
 public:
  OpenMPBackend();
  std::string name() const override { return "openmp"; }
  DeviceProperties properties() const override;

  // Copies split over the threads from 128 KiB up, each thread copying the share its kernels then
  // compute on (in its own cache); one core alone does not reach the memory bandwidth either.
  void copy_to_device(Queue q, void* d_dst, const void* h_src, std::size_t bytes) override;
  void copy_to_host(Queue q, void* h_dst, const void* d_src, std::size_t bytes) override;
  void copy_on_device(Queue q, void* d_dst, const void* d_src, std::size_t bytes) override;
  std::vector<MatmulTier> matmul_tiers(DType ab) const override;
  MatmulTier choose_matmul_tier(const GemmArgs& args) const override;
  void matmul(Queue q, const GemmArgs& args) override;
  // Chunks of [0, n) spread over the team, a few per thread, handed out as threads come free
  // (user kernels' blocks and parallel_for's items cost what the user's code costs).
  void host_parallel(Queue q, std::size_t n, std::size_t grain, unsigned max_threads,
                     const std::function<void(std::size_t, std::size_t)>& body) override;

 protected:
  // The outputs of ops that move at least this many bytes (inputs and output together) are
  // written in interleaved runs, those that overlap no input with streaming (non-temporal) stores
  // where store_tuning() says so: the last-level cache's size, or TANDEM_OPENMP_STREAM_FROM. It is
  // the bytes moved, not the output's size, because the inputs compete for the cache too; below
  // the cache's size plain stores leave the output in cache for the next op.
  std::size_t stream_from_bytes() const { return stream_from_bytes_; }
  // Every operation starts here: the queue checked, and the team size set for the op.
  TeamScope enter(Queue q) const {
    check_queue(q);
    return TeamScope(team_);
  }
  // The sums' prefetch for distinct inputs of `bytes` together: the calibrated one (store_tuning) from
  // stream_from_bytes(), where the reads come from memory; the table's below, without waiting for
  // a calibration.
  ReadPrefetch reduce_prefetch(std::size_t bytes) const;
  // Whether the sums of distinct inputs of `bytes` together read them with the AVX2 kernels'
  // loops (sum_loops_avx2) instead of this ISA's: from stream_from_bytes(), where store_tuning()
  // chose them (AVX-512 kernels only).
  bool narrow_sums(std::size_t bytes) const;

 private:
  int threads_;
  std::size_t stream_from_bytes_;
  mutable Team team_;
};

// The ISA whose kernels this process runs: "avx512", "avx2" or "generic", the widest this CPU
// has that TANDEM_CPU_ISA allows.
std::string_view kernels_isa();

// How outputs past the last-level cache are written, chosen per CPU (tuning.cpp): the number of
// interleaved streaming-store runs per thread that is fastest differs between CPUs by up to a
// factor of three. Measured by a calibration on first use (with the scan's and the sums'
// prefetch, about half a second) and cached per CPU model, thread count,
// tandem version and the kernels' ISA; TANDEM_TUNING=table skips it, TANDEM_OPENMP_STORES (streaming, plain) and
// TANDEM_OPENMP_STORE_RUNS (1, 2, 4) force the choices (both forced: nothing is measured or read
// from the cache, and the prefetches are the tables'), TANDEM_OPENMP_STREAM_FROM the bytes an op
// moves (inputs and output) from which they apply (and the sums' prefetches).
struct StoreTuning {
  bool stream = true;   // outputs that overlap no input: streaming (non-temporal) stores
  int runs = 4;         // interleaved runs per thread for those outputs (1, 2 or 4)
  int update_runs = 4;  // and for outputs that are also an input (axpy's y), stored in place
  ReadPrefetch scan_prefetch = kScanPrefetchTable;      // the scan's prefetch (prefetch.hpp)
  std::string scan_measured;                            // each scan prefetch variant's GB/s when calibrated
  ReadPrefetch reduce_prefetch = kReducePrefetchTable;  // the sums' (sum, norm2, dot, mse)
  bool narrow_sums = false;     // the sums read with the AVX2 kernels' 256-bit loops (AVX-512 kernels)
  std::string reduce_measured;  // each sums variant's GB/s when calibrated
  std::string source;           // "calibrated now", "cached in FILE", "table (AuthenticAMD)", an environment variable
  std::string measured;         // each variant's GB/s when calibrated, else ""
};
const StoreTuning& store_tuning();

// The calibrations' timing (the stores here, the gemm blocking): every time of `rounds` runs of
// each of `count` variants (run(v) runs variant v), in seconds, per variant. One untimed run of
// each (one untimed run in all would be cheaper, but GCC 12's LeakSanitizer crashed at the exit
// of a process that had calibrated so), then rounds that take the variants in turn, each round
// starting one further on: timed one after another, the later variants gain from a memory that
// speeds up during the calibration, and the choice goes wrong.
template <class Run>
std::vector<std::vector<double>> times_in_rotating_rounds(std::size_t count, int rounds, Run run) {
  rounds = std::max(rounds, 1);  // every variant has a time
  for (std::size_t v = 0; v < count; ++v) run(v);
  std::vector<std::vector<double>> times(count);
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t k = 0; k < count; ++k) {
      const std::size_t v = (k + static_cast<std::size_t>(r)) % count;
      const double t0 = omp_get_wtime();
      run(v);
      times[v].push_back(omp_get_wtime() - t0);
    }
  }
  return times;
}

// The fastest of each variant's times above.
template <class Run>
std::vector<double> fastest_in_rotating_rounds(std::size_t count, int rounds, Run run) {
  std::vector<double> best;
  for (const auto& t : times_in_rotating_rounds(count, rounds, run))
    best.push_back(*std::min_element(t.begin(), t.end()));
  return best;
}

// The median of each variant's times above (the upper one of an even count).
template <class Run>
std::vector<double> median_in_rotating_rounds(std::size_t count, int rounds, Run run) {
  std::vector<double> median;
  for (auto t : times_in_rotating_rounds(count, rounds, run)) {
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    median.push_back(t[t.size() / 2]);
  }
  return median;
}

// The calibration's three arrays of n floats, written first window by window by the threads
// that use each part of it, as the kernels' own buffers are (a 0, b i & 255, c i & 127). One set for the store, scan
// and sum calibrations: each allocating its own spent about a quarter of the calibration in first touches (a first
// touch costs three passes). A timed run covers one window of them, the next run the next window, round the arrays: a
// run costs the same whatever the size of the last-level cache (full passes over arrays twice a large cache take
// seconds), while what a run reads was last touched all the arrays ago, as with full passes, so it comes from memory.
class CalibrationArrays {
 public:
  // Arrays of about `bytes` each (a whole number of windows, at least one), in windows of about
  // `window_bytes`.
  CalibrationArrays(std::size_t bytes, std::size_t window_bytes);
  CalibrationArrays(const CalibrationArrays&) = delete;
  CalibrationArrays& operator=(const CalibrationArrays&) = delete;
  ~CalibrationArrays();
  bool ok() const { return a != nullptr && b != nullptr && c != nullptr; }  // allocated, window >= kParallelFromTable
  // Where run `run` (0, 1, ...) starts: the windows in turn.
  std::size_t offset(std::size_t run) const { return run % (n / window) * window; }

  std::size_t window = 0;  // floats per run, a multiple of 64
  std::size_t n = 0;       // a whole number of windows
  float* a = nullptr;
  float* b = nullptr;
  float* c = nullptr;
};

// The calibration: triad-like loops (a = b + s c, and in place a = a + s c) over the arrays'
// windows, in every store variant the kernels have, the best of `reps` runs of each.
struct StoreVariant {
  bool stream = false;
  bool in_place = false;
  int runs = 1;
  double gbs = 0;
};
std::vector<StoreVariant> measure_store_variants(const CalibrationArrays& arrays, int reps);
// The loops the calibrations time, in the code of kernels_isa()'s kernels (kernels.inl): the
// store variants, and an f32 dot and inclusive scan with a given prefetch (and streamed stores
// from `stream_from` bytes, SIZE_MAX: plain).
class CalibrationLoops {
 public:
  virtual ~CalibrationLoops() = default;
  virtual std::vector<StoreVariant> store_variants(const CalibrationArrays& arrays, int reps) const = 0;
  virtual void dot(std::size_t n, const float* x, const float* y, float* result, ReadPrefetch pf) const = 0;
  virtual void scan(std::size_t n, const float* x, float* out, std::size_t stream_from, ReadPrefetch pf) const = 0;
  // c = a + b, on the team or on the calling thread (the parallel_from calibration).
  virtual void add(std::size_t n, const float* a, const float* b, float* c, bool team) const = 0;
};
const CalibrationLoops& calibration_loops();
// The scan's prefetch variants (the first is the table's), each timed as the best of `reps` scans
// of a window of b into a with this tuning's stores; returns the GB/s (read + write) of each.
const std::vector<ReadPrefetch>& scan_prefetch_variants();
std::vector<double> measure_scan_prefetch(const CalibrationArrays& arrays, int reps, bool stream);
// One ISA's sums (reduce.inl) for the backend of another: the AVX-512 backend reads inputs past the
// last-level cache with the AVX2 loops unless its own were 3% faster in the calibration, or as
// TANDEM_OPENMP_REDUCE_ISA says (StoreTuning::narrow_sums).
class SumLoops {
 public:
  virtual ~SumLoops() = default;
  virtual void reduce(ReduceOp op, DType t, std::size_t n, const void* x, void* result, ReadPrefetch pf) const = 0;
  virtual void dot(DType t, std::size_t n, const void* x, const void* y, void* result, ReadPrefetch pf) const = 0;
  virtual void mse(DType t, std::size_t n, const void* a, const void* b, void* result, ReadPrefetch pf) const = 0;
};
// The sums' variants: with the AVX-512 kernels first the AVX2 loops unprefetched (`narrow`), then
// this ISA's unprefetched, then with a prefetch; each timed as the median of `reps` rounds of an
// f32 dot of a window of b and c; returns the GB/s (read) of each.
struct SumVariant {
  bool narrow = false;
  ReadPrefetch pf{0, false};
};
std::vector<SumVariant> reduce_variants();
std::vector<double> measure_reduce_variants(const CalibrationArrays& arrays, int reps);
// "off", "l2:2048", "avx2 off": a variant as `tandem info` lists what each measured.
std::string sum_variant_key(const SumVariant& v);
// "4096 bytes ahead into L2", and the same as written in the cache file and
// TANDEM_OPENMP_SCAN_PREFETCH / TANDEM_OPENMP_REDUCE_PREFETCH ("l2:4096", or "off":
// env::parse_cache_distance).
std::string prefetch_text(ReadPrefetch pf);
std::string prefetch_key(ReadPrefetch pf);
// The fastest variant of each kind: the tuning a measurement gives.
StoreTuning choose_store_tuning(const std::vector<StoreVariant>& measured);

// The register_blocked tier's cache blocking for large products with f32 compute (f32, f16 and
// bf16 inputs), chosen per CPU like the stores (tuning.cpp): a calibration, on the first such
// product of 512^3 multiply-adds or more or on the first properties() call (tandem info), times
// the micro-kernel's table blocking against deeper k blocks, each in both loop orders
// (Blocking::a_in_l1; gemm_blocking_candidates) and keeps the first, in that order, within 3% of
// the fastest; cached beside the store tuning (a cached blocking that is not one of this build's
// candidates is measured again). TANDEM_TUNING=table skips it, TANDEM_OPENMP_GEMM_BLOCKING forces a
// blocking for every product, TANDEM_OPENMP_GEMM_L1 the loop order. f64 keeps its table.
struct GemmTuning {
  Blocking blocking{};
  std::string source;    // "calibrated now (...)", "cached in FILE", "table: avx512"
  std::string measured;  // each candidate's GFLOP/s when calibrated, else ""
};
const GemmTuning& gemm_tuning();
// The candidates (the first is the table's) and each one's GFLOP/s, the best of two products of
// each, taken in turn (empty: the calibration's matrices could not be allocated).
std::vector<Blocking> gemm_blocking_candidates();
std::vector<double> measure_gemm_blockings(const std::vector<Blocking>& candidates);
// Whether TANDEM_OPENMP_GEMM_BLOCKING forces the blocking (read once, as the products read it).
bool gemm_blocking_forced();
// The table's blocking for a micro-kernel ("avx512", "avx2", "generic"), f32 or f64.
Blocking table_blocking(std::string_view isa, bool f32);
// The f32 blocking and where it comes from, for tandem info.
std::string gemm_blocking_text();

// From which product size (m * n * k) the register_blocked tier runs on the team: below it the
// product runs on the calling thread. Forking the team, its barrier per k block and the shared
// row queue cost microseconds, which a small product (an MLP's 32-row batches) does not win
// back; how many depends on the CPU and how its threads wait (on a 2-vCPU Emerald Rapids VM two
// threads were slower than one at 64^3 to 96^3). Measured on first use like the bf16 crossover:
// f32 cubes of 32^3 to 256^3 on one thread and on the team, each chained (inputs written before
// and output read after on the calling thread), the team taken from the smallest size where it
// needed at most 0.9 of one thread's time there and at every larger size; from 512^3 when it
// never did (every large product measured has gained from the team). The table
// (TANDEM_TUNING=table, first needed inside a parallel region or on a team of one): 128^3, within
// what calibrations chose on an Emerald Rapids Xeon (96^3-192^3) and a Zen 3 EPYC (96^3-512^3).
// Products below the smallest cube measured run on the calling thread, and from 512^3 on the
// team, without asking (the first small product does not wait for the calibration).
inline constexpr std::int64_t kMatmulParallelTable = std::int64_t(1) << 21;
const Crossover& matmul_parallel_tuning();
bool matmul_on_team(std::int64_t multiply_adds);

// Whether kernels for `isa` ("avx512", "avx2") may run: the CPU has it and TANDEM_CPU_ISA
// (generic < avx2 < avx512) does not cap below it.
bool isa_allowed(std::string_view isa);

// Matmul tiers (matmul.cpp, gemm_packed.cpp, vendor.cpp).
void matmul_naive(const GemmArgs& g);
void matmul_tiled(const GemmArgs& g);
void matmul_register_blocked(const GemmArgs& g);
bool vendor_available();
// The vendor tier's library and the kernels it chose for this CPU, with a warning when they are
// for an older ISA than the CPU has: "OpenBLAS 0.3.21, Prescott kernels (SSE): older than ...".
std::string vendor_description();
void matmul_vendor(const GemmArgs& g);
// C = beta * C, or C = 0 without reading it when beta == 0 (BLAS semantics); used before tiers that add.
void prescale_c(const GemmArgs& g);

}  // namespace tandem::openmp
