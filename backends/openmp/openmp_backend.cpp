#include "openmp_backend.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string_view>

#include "../../core/factories.hpp"
#include "../host/cpu_info.hpp"
#include "kernels.hpp"
#include "microkernel.hpp"
#include "tandem/environment.hpp"
#include "tandem/topology.hpp"

namespace tandem::openmp {

namespace {

// Streaming stores and interleaved runs pay once the bytes an op moves (inputs and output) pass
// the last-level cache, where its output cannot stay cached anyway (32 MiB where the OS does not
// say its size). TANDEM_OPENMP_STREAM_FROM=BYTES moves the threshold (the tests use it to run
// those paths at small sizes); "off" never takes them.
std::size_t stream_from_bytes_setting() {
  if (const auto bytes = env::stream_from()) return *bytes == UINT64_MAX ? SIZE_MAX : std::size_t(*bytes);
  const CpuTopology& cpu = cpu_topology();  // sysfs: the size of one last-level cache
  const std::size_t last_level = cpu.l3_bytes ? cpu.l3_bytes : cpu.l2_bytes;
  return last_level ? last_level : std::size_t(32) << 20;
}

}  // namespace

bool isa_allowed(std::string_view isa) {
  static const std::string cap = [] {
    return env::choice("TANDEM_CPU_ISA", {"generic", "avx2", "avx512"}, "avx512");
  }();
  if (isa == "avx512") return cap == "avx512" && host::cpu_has_avx512f();
  if (isa == "avx2") return (cap == "avx512" || cap == "avx2") && host::cpu_has_avx2_fma();
  return isa == "generic";
}

OpenMPBackend::OpenMPBackend() : threads_(omp_get_max_threads()), stream_from_bytes_(stream_from_bytes_setting()) {}

DeviceProperties OpenMPBackend::properties() const {
  DeviceProperties p = host::cpu_properties(threads_);
  p.isa_features.push_back(std::string("microkernel:") + best_microkernel_f32().isa);
  p.isa_features.push_back(std::string("kernels:") + cpu_kernels().isa);
  const StoreTuning& t = store_tuning();
  const std::size_t from = stream_from_bytes_;
  const std::string when = from == SIZE_MAX    ? std::string("never (TANDEM_OPENMP_STREAM_FROM=off)")
                           : from < (1u << 20) ? "for ops that move " + std::to_string(from) + " bytes or more"
                                               : "for ops that move " + std::to_string(from >> 20) + " MiB or more";
  p.tuning.push_back({"stores", std::string(t.stream ? "streaming" : "plain") + ", " + std::to_string(t.runs) +
                                    " interleaved run(s) per thread (in place: " + std::to_string(t.update_runs) +
                                    "), " + when + (from == SIZE_MAX ? "" : " (inputs and output together)")});
  p.tuning.push_back({"stores chosen by", t.source});
  if (!t.measured.empty()) p.tuning.push_back({"stores measured", t.measured});
  p.tuning.push_back({"scan prefetch", prefetch_text(t.scan_prefetch)});
  if (!t.scan_measured.empty()) p.tuning.push_back({"scan prefetch measured", t.scan_measured});
  p.tuning.push_back({"reduction prefetch", prefetch_text(t.reduce_prefetch)});
  if (!t.reduce_measured.empty()) p.tuning.push_back({"reduction prefetch measured", t.reduce_measured});
  p.tuning.push_back({"kernels", std::string(cpu_kernels().isa) + " (elementwise, reductions, scans, softmax)"});
  p.tuning.push_back({"micro-kernel", best_microkernel_f32().isa});
  p.tuning.push_back({"gemm blocking f32", gemm_blocking_text()});
  if (!gemm_blocking_forced() && !gemm_tuning().measured.empty()) {
    p.tuning.push_back({"gemm blocking measured", gemm_tuning().measured});
  }
  return p;
}

const CpuKernels& cpu_kernels() {
  static const CpuKernels chosen = [] {
#ifdef TANDEM_X86_KERNELS
    if (isa_allowed("avx512")) return cpu_kernels_avx512();
    if (isa_allowed("avx2")) return cpu_kernels_avx2();
#endif
    return cpu_kernels_generic();
  }();
  return chosen;
}

CalibrationArrays::CalibrationArrays(std::size_t bytes, std::size_t window_bytes) {
  // The whole number of windows nearest bytes / window_bytes (at least one), so that the arrays
  // stay within a window's rounding of `bytes`.
  const std::size_t windows =
      std::max<std::size_t>(1, (bytes + window_bytes / 2) / std::max<std::size_t>(window_bytes, 1));
  window = bytes / windows / sizeof(float) / 64 * 64;
  if (window < kParallelThreshold) return;
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
  return cpu_kernels().measure_store_variants(arrays, reps);
}

const std::vector<ReadPrefetch>& scan_prefetch_variants() {
  static const std::vector<ReadPrefetch> variants = {kScanPrefetchTable, {4096, false}, {2048, true},
                                                     {4096, true},       {8192, true},  {0, false}};
  return variants;
}

// The table's first; then none, for CPUs whose hardware prefetchers do better alone (Zen 3 EPYC:
// dot 97-99% of copy without, 72-82% with the table's); then into L1.
const std::vector<ReadPrefetch>& reduce_prefetch_variants() {
  static const std::vector<ReadPrefetch> variants = {kReducePrefetchTable, {0, false}, {2048, false}};
  return variants;
}

namespace {

// GB/s of `bytes_per_run` per run for each variant's time.
std::vector<double> gigabytes_per_second(double bytes_per_run, const std::vector<double>& seconds) {
  std::vector<double> gbs;
  for (const double t : seconds) gbs.push_back(bytes_per_run / t / 1e9);
  return gbs;
}

}  // namespace

std::vector<double> measure_reduce_prefetch(const CalibrationArrays& arrays, int reps) {
  // A dot: two inputs prefetched per stream, where a prefetch that does not pay costs most (twice
  // what it costs a sum).
  if (!arrays.ok()) return {};
  const std::vector<ReadPrefetch>& variants = reduce_prefetch_variants();
  float result = 0;
  std::size_t done = 0;
  // The median, not the fastest: a prefetch that costs 15-20% in most runs can match none in its
  // fastest.
  return gigabytes_per_second(
      2.0 * double(arrays.window * sizeof(float)), median_in_rotating_rounds(variants.size(), reps, [&](std::size_t v) {
        const std::size_t at = arrays.offset(done++);
        cpu_kernels().dot(DType::f32, arrays.window, arrays.b + at, arrays.c + at, &result, variants[v]);
      }));
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
                                cpu_kernels().scan(ScanKind::inclusive, DType::f32, arrays.window, arrays.b + at,
                                                   arrays.a + at, stream ? 0 : SIZE_MAX, variants[v]);
                              }));
}

ReadPrefetch OpenMPBackend::reduce_prefetch(std::size_t bytes) const {
  return bytes < stream_from_bytes_ ? kReducePrefetchTable : store_tuning().reduce_prefetch;
}

// The kernels of this CPU's ISA (kernels.hpp); the arguments were checked by the algorithms layer.
void OpenMPBackend::binary(Queue q, BinaryOp op, DType t, std::size_t n, const void* x, const void* y, void* out) {
  check_queue(q);
  cpu_kernels().binary(op, t, n, x, y, out, stream_from_bytes_);
}

void OpenMPBackend::unary(Queue q, UnaryOp op, DType t, std::size_t n, const void* x, void* out) {
  check_queue(q);
  cpu_kernels().unary(op, t, n, x, out, stream_from_bytes_);
}

void OpenMPBackend::axpy(Queue q, DType t, std::size_t n, double alpha, const void* x, void* y) {
  check_queue(q);
  cpu_kernels().axpy(t, n, alpha, x, y, stream_from_bytes_);
}

void OpenMPBackend::scale(Queue q, DType t, std::size_t n, double alpha, const void* x, void* out) {
  check_queue(q);
  cpu_kernels().scale(t, n, alpha, x, out, stream_from_bytes_);
}

void OpenMPBackend::fill(Queue q, DType t, std::size_t n, double value, void* out) {
  check_queue(q);
  cpu_kernels().fill(t, n, value, out, stream_from_bytes_);
}

void OpenMPBackend::add_row_vector(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* x,
                                   std::int64_t ldx, const void* bias, void* out, std::int64_t ldo) {
  check_queue(q);
  cpu_kernels().add_row_vector(t, rows, cols, x, ldx, bias, out, ldo);
}

void OpenMPBackend::bias_activation(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* x,
                                    std::int64_t ldx, const void* bias, UnaryOp act, void* z, std::int64_t ldz,
                                    void* out, std::int64_t ldo) {
  check_queue(q);
  cpu_kernels().bias_activation(t, rows, cols, x, ldx, bias, act, z, ldz, out, ldo);
}

void OpenMPBackend::matrix_add(Queue q, DType t, std::int64_t rows, std::int64_t cols, double alpha, const void* a,
                               std::int64_t lda, double beta, const void* b, std::int64_t ldb, void* c,
                               std::int64_t ldc) {
  check_queue(q);
  cpu_kernels().matrix_add(t, rows, cols, alpha, a, lda, beta, b, ldb, c, ldc);
}

void OpenMPBackend::transpose(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* a, std::int64_t lda,
                              void* out, std::int64_t ldo) {
  check_queue(q);
  cpu_kernels().transpose(t, rows, cols, a, lda, out, ldo);
}

void OpenMPBackend::gather_rows(Queue q, DType t, std::int64_t rows, std::int64_t cols, const std::int32_t* index,
                                std::int64_t x_rows, const void* x, std::int64_t ldx, void* out, std::int64_t ldo) {
  check_queue(q);
  cpu_kernels().gather_rows(t, rows, cols, index, x_rows, x, ldx, out, ldo);
}

void OpenMPBackend::convert(Queue q, DType from, DType to, std::size_t n, const void* x, void* out) {
  check_queue(q);
  cpu_kernels().convert(from, to, n, x, out);
}

void OpenMPBackend::adam_step(Queue q, DType t, std::size_t n, const AdamParams& p, void* w, const void* g, void* m,
                              void* v) {
  check_queue(q);
  cpu_kernels().adam_step(t, n, p, w, g, m, v);
}

void OpenMPBackend::reduce(Queue q, ReduceOp op, DType t, std::size_t n, const void* x, void* result,
                           ReduceVariant) {
  check_queue(q);
  // min, max and argmax do not prefetch: they neither need the calibration nor wait for it.
  const bool sums = op == ReduceOp::sum || op == ReduceOp::norm2;
  cpu_kernels().reduce(op, t, n, x, result, sums ? reduce_prefetch(n * size_of(t)) : kReducePrefetchTable);
}

void OpenMPBackend::dot(Queue q, DType t, std::size_t n, const void* x, const void* y, void* result) {
  check_queue(q);
  cpu_kernels().dot(t, n, x, y, result, reduce_prefetch((x == y ? 1 : 2) * n * size_of(t)));
}

void OpenMPBackend::mse(Queue q, DType t, std::size_t n, const void* a, const void* b, void* result) {
  check_queue(q);
  cpu_kernels().mse(t, n, a, b, result, reduce_prefetch((a == b ? 1 : 2) * n * size_of(t)));
}

void OpenMPBackend::reduce_rows(Queue q, ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x,
                                std::int64_t ldx, void* out) {
  check_queue(q);
  cpu_kernels().reduce_rows(op, t, rows, cols, x, ldx, out);
}

void OpenMPBackend::reduce_cols(Queue q, ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x,
                                std::int64_t ldx, void* out) {
  check_queue(q);
  cpu_kernels().reduce_cols(op, t, rows, cols, x, ldx, out);
}

void OpenMPBackend::softmax_cross_entropy(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* logits,
                                          std::int64_t ld_logits, const std::int32_t* labels, void* probs,
                                          std::int64_t ld_probs, void* losses) {
  check_queue(q);
  cpu_kernels().softmax_cross_entropy(t, rows, cols, logits, ld_logits, labels, probs, ld_probs, losses);
}

void OpenMPBackend::scan(Queue q, ScanKind kind, DType t, std::size_t n, const void* x, void* out, ScanVariant) {
  check_queue(q);
  // Like the stores, the prefetch is tuned for data past the last-level cache; a smaller scan
  // takes the table's and does not wait for a calibration.
  if ((x == out ? 1 : 2) * n * size_of(t) < stream_from_bytes_) {
    cpu_kernels().scan(kind, t, n, x, out, SIZE_MAX, kScanPrefetchTable);
    return;
  }
  const StoreTuning& tune = store_tuning();
  cpu_kernels().scan(kind, t, n, x, out, tune.stream ? stream_from_bytes_ : SIZE_MAX, tune.scan_prefetch);
}

std::vector<MatmulTier> OpenMPBackend::matmul_tiers(DType ab) const {
  std::vector<MatmulTier> tiers = {MatmulTier::naive, MatmulTier::tiled, MatmulTier::register_blocked};
  if (vendor_available() && (ab == DType::f32 || ab == DType::f64)) tiers.push_back(MatmulTier::vendor);
  return tiers;
}

MatmulTier OpenMPBackend::choose_matmul_tier(const GemmArgs& g) const {
  // Packing pays off once the product has some depth; tiny products go straight through.
  if (g.m * g.n * g.k < 4096) return MatmulTier::naive;
  return MatmulTier::register_blocked;
}

void OpenMPBackend::matmul(Queue q, const GemmArgs& g) {
  check_queue(q);
  try {
    switch (g.tier) {
      case MatmulTier::naive:
        matmul_naive(g);
        break;
      case MatmulTier::tiled:
        matmul_tiled(g);
        break;
      case MatmulTier::register_blocked:
        matmul_register_blocked(g);
        break;
      case MatmulTier::vendor:
        matmul_vendor(g);
        break;
      default:
        throw Unsupported("openmp: matmul tier '" + std::string(name_of(g.tier)) + "' is not offered");
    }
  } catch (const std::bad_alloc&) {  // packing buffers: report it as the typed error
    throw OutOfMemory(static_cast<std::size_t>((g.m + g.n) * std::min<std::int64_t>(g.k, 512)) * size_of(g.c_type),
                      device_free_bytes(), name() + " (matmul packing buffers)");
  }
}

}  // namespace tandem::openmp

namespace tandem::detail {
int openmp_device_count(std::string&) { return 1; }
std::shared_ptr<Backend> make_openmp_backend(int) { return make_backend<openmp::OpenMPBackend>(); }
}  // namespace tandem::detail
