// CPU benchmark: openmp against the peers measured in the same run.
//   memory-bound ops (elementwise, reductions, scan) in GB/s as a share of the copy bandwidth
//   this benchmark measures (an OpenMP STREAM-style copy, bytes read + written);
//   sgemm GFLOP/s of each openmp tier as a share of OpenBLAS's (the vendor tier) at N = 1024, 2048.
// Each figure is the median of several runs after a warm-up. Not a test: it asserts nothing.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "tandem/tandem.hpp"

using namespace tandem;

namespace {

using bench::median_seconds;

struct Row {
  std::string group, name, unit;
  double value, peer, ratio;
  std::string peer_name;
};

}  // namespace

int main(int argc, char** argv) {
  bench::Options options;
  const int exit_code = bench::parse_options(
      argc, argv,
      "usage: tandem_bench_cpu [--quick] [--json FILE]\n"
      "  openmp vs OpenBLAS sgemm (N = 1024, 2048) and memory-bound ops vs measured copy bandwidth\n",
      options);
  if (exit_code >= 0) return exit_code;
  const bool quick = options.quick;
  const std::string json_path = options.json_path;
  Backend& be = get_backend("openmp");
  const DeviceProperties props = be.properties();
  const int reps = quick ? 3 : 7;
  std::vector<Row> rows;

  // ---- memory-bound: 32 Mi floats per array (128 MiB), far past every cache ----
  const std::size_t n = std::size_t(32) << 20;
  std::vector<float> h(n);
  for (std::size_t i = 0; i < n; ++i) h[i] = float(i % 1000) * 1e-3f;
  Buffer x = Buffer::from(be, h), y = Buffer::from(be, h), out(be, DType::f32, n), r(be, DType::f32, 1);
  const double gb = double(n) * 4 / 1e9;  // one array

  float* d_src = static_cast<float*>(x.data());
  float* d_dst = static_cast<float*>(out.data());
  const auto count = static_cast<std::int64_t>(n);
  const double copy_s = median_seconds(reps, [&] {
#pragma omp parallel for simd schedule(static)
    for (std::int64_t i = 0; i < count; ++i) d_dst[i] = d_src[i];
  });
  const double copy_gbs = 2 * gb / copy_s;
  auto mem_row = [&](const std::string& name, double arrays_moved, const std::function<void()>& f) {
    const double s = median_seconds(reps, f);
    const double gbs = arrays_moved * gb / s;
    rows.push_back({"memory", name, "GB/s", gbs, copy_gbs, gbs / copy_gbs, "copy"});
  };
  rows.push_back({"memory", "copy (omp parallel, peer)", "GB/s", copy_gbs, copy_gbs, 1.0, "copy"});
  mem_row("add f32 (2 reads + 1 write)", 3, [&] { add(x, y, out); });
  mem_row("axpy f32 (2 reads + 1 write)", 3, [&] { axpy(0.5, x, out); });
  mem_row("scale f32 (1 read + 1 write)", 2, [&] { scale(2.0, x, out); });
  mem_row("relu f32 (1 read + 1 write)", 2, [&] { relu(x, out); });
  mem_row("sum f32 (1 read)", 1, [&] { reduce(ReduceOp::sum, x, r); });
  mem_row("max f32 (1 read)", 1, [&] { reduce(ReduceOp::max, x, r); });
  mem_row("dot f32 (2 reads)", 2, [&] { dot(x, y, r); });
  mem_row("inclusive_scan f32 (1 read + 1 write)", 2, [&] { inclusive_scan(x, out); });

  // ---- sgemm tiers against OpenBLAS ----
  const auto tiers = be.matmul_tiers(DType::f32);
  const bool have_vendor = std::find(tiers.begin(), tiers.end(), MatmulTier::vendor) != tiers.end();
  for (std::int64_t N : {std::int64_t(1024), std::int64_t(2048)}) {
    const std::size_t nn = static_cast<std::size_t>(N * N);
    std::vector<float> ha(nn), hb(nn);
    for (std::size_t i = 0; i < nn; ++i) {
      ha[i] = float((i * 7) % 13) * 0.1f - 0.6f;
      hb[i] = float((i * 5) % 11) * 0.1f - 0.5f;
    }
    Buffer a = Buffer::from(be, ha), b = Buffer::from(be, hb), c(be, DType::f32, nn);
    Matrix am = matrix(a, N, N), bm = matrix(b, N, N), cm = matrix(c, N, N);
    const double flops = 2.0 * double(N) * double(N) * double(N);
    auto gflops = [&](MatmulTier tier) {
      MatmulOptions o;
      o.tier = tier;
      const int matmul_reps = quick ? 3 : 5;
      return flops / median_seconds(matmul_reps, [&] { matmul(am, bm, cm, o); }) / 1e9;
    };
    const double peer = have_vendor ? gflops(MatmulTier::vendor) : 0;
    const std::string size = "N=" + std::to_string(N);
    if (have_vendor)
      rows.push_back({"sgemm " + size, "OpenBLAS (vendor tier, peer)", "GFLOP/s", peer, peer, 1.0, "OpenBLAS"});
    for (MatmulTier tier : {MatmulTier::register_blocked, MatmulTier::tiled}) {
      const double g = gflops(tier);
      rows.push_back(
          {"sgemm " + size, std::string(name_of(tier)), "GFLOP/s", g, peer, peer > 0 ? g / peer : 0, "OpenBLAS"});
    }
    if (N == 1024) {
      const double g = gflops(MatmulTier::naive);
      rows.push_back({"sgemm " + size, "naive", "GFLOP/s", g, peer, peer > 0 ? g / peer : 0, "OpenBLAS"});
    }
  }

  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::printf("tandem CPU benchmark, %s, %s, %d threads, micro-kernel %s\n", props.name.c_str(), date,
              omp_get_max_threads(), props.isa_features.empty() ? "?" : props.isa_features.back().c_str());
  std::printf("%-16s %-40s %12s %-8s %10s\n", "group", "what", "value", "unit", "vs peer");
  for (const auto& row : rows) {
    std::printf("%-16s %-40s %12.1f %-8s %9.1f%% of %s\n", row.group.c_str(), row.name.c_str(), row.value,
                row.unit.c_str(), row.ratio * 100, row.peer_name.c_str());
  }
  if (!have_vendor) std::printf("(no OpenBLAS in this build: sgemm ratios are not available)\n");

  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "tandem_bench_cpu: cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::fprintf(f, "{\"machine\": \"%s\", \"date\": \"%s\", \"threads\": %d, \"results\": [", props.name.c_str(), date,
                 omp_get_max_threads());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& row = rows[i];
      std::fprintf(f,
                   "%s\n  {\"group\": \"%s\", \"name\": \"%s\", \"unit\": \"%s\", \"value\": %.3f, \"peer\": \"%s\", "
                   "\"peer_value\": %.3f, \"ratio\": %.4f}",
                   i ? "," : "", row.group.c_str(), row.name.c_str(), row.unit.c_str(), row.value,
                   row.peer_name.c_str(), row.peer, row.ratio);
    }
    std::fprintf(f, "\n]}\n");
    std::fclose(f);
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}
