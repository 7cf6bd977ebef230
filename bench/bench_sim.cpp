// How fast the GPU simulator is: the same op on sim and on openmp (the peer, same run), as time
// and as a slowdown factor, plus the cost of the simulator's machinery (a launch, a block-wide
// barrier per thread, a warp shuffle per thread). The simulator is a correctness tool; this says
// how large a problem is practical under it. Medians after a warm-up. Asserts nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "tandem/gpu/kernel_api.hpp"
#include "tandem/tandem.hpp"

using namespace tandem;
namespace g = tandem::gpu;

namespace {

using bench::median_seconds;

TANDEM_KERNEL void empty_kernel() {}
TANDEM_KERNEL void barriers_kernel(int rounds) {
  for (int r = 0; r < rounds; ++r) g::sync_threads();
}
TANDEM_KERNEL void shuffles_kernel(int rounds, int* out) {
  int v = static_cast<int>(g::thread_rank());
  for (int r = 0; r < rounds; ++r) v += g::shfl_xor(v, 1u);
  if (v == 42) out[0] = v;  // keep the loop
}

struct Row {
  std::string name, size;
  double sim_ms, peer_ms;
};

}  // namespace

int main(int argc, char** argv) {
  bench::Options options;
  const int exit_code = bench::parse_options(
      argc, argv,
      "usage: tandem_bench_sim [--quick] [--json FILE]\n"
      "  the GPU simulator's speed: ops on sim vs openmp, and the cost of launches, barriers, shuffles\n",
      options);
  if (exit_code >= 0) return exit_code;
  const bench::CpuTicks ticks_at_start = bench::cpu_ticks();
  const bool quick = options.quick;
  const std::string json_path = options.json_path;
  Backend& sim = get_backend("sim");
  Backend& cpu = get_backend("openmp");
  const int reps = quick ? 3 : 5;
  const std::size_t n = quick ? (1u << 18) : (1u << 20);
  const std::int64_t mm = quick ? 128 : 256;
  std::vector<Row> rows;

  auto both = [&](const std::string& name, const std::string& size, const std::function<void(Backend&)>& op) {
    rows.push_back(
        {name, size, 1e3 * median_seconds(reps, [&] { op(sim); }), 1e3 * median_seconds(reps, [&] { op(cpu); })});
  };
  std::vector<float> host(n, 1.0f);
  const std::string nn = std::to_string(n);
  both("add f32", nn, [&](Backend& be) {
    Buffer x = Buffer::from(be, host), y = Buffer::from(be, host), z(be, DType::f32, n);
    add(x, y, z);
    be.synchronize({});
  });
  for (ReduceVariant v : sim.reduce_variants()) {
    both(std::string("sum f32 (").append(name_of(v)) + ")", nn, [&](Backend& be) {
      Buffer x = Buffer::from(be, host), r(be, DType::f32, 1);
      reduce(ReduceOp::sum, x, r, {}, &be == &sim ? v : ReduceVariant::automatic);
      be.synchronize({});
    });
  }
  for (ScanVariant v : sim.scan_variants()) {
    both(std::string("inclusive_scan f32 (").append(name_of(v)) + ")", nn, [&](Backend& be) {
      Buffer x = Buffer::from(be, host), r(be, DType::f32, n);
      inclusive_scan(x, r, {}, &be == &sim ? v : ScanVariant::automatic);
      be.synchronize({});
    });
  }
  const std::string msize = std::to_string(mm) + "^3";
  std::vector<float> mh(static_cast<std::size_t>(mm * mm), 0.5f);
  for (MatmulTier t : {MatmulTier::naive, MatmulTier::tiled, MatmulTier::register_blocked}) {
    both(std::string("matmul f32 (") + std::string(name_of(t)) + ")", msize, [&](Backend& be) {
      Buffer a = Buffer::from(be, mh), b = Buffer::from(be, mh), c(be, DType::f32, mh.size());
      Matrix mc = matrix(c, mm, mm);
      MatmulOptions o;
      o.tier = t;
      matmul(matrix(a, mm, mm), matrix(b, mm, mm), mc, o);
      be.synchronize({});
    });
  }

  // The machinery on its own.
  const unsigned threads = 256, blocks = 64;
  const int rounds = quick ? 20 : 100;
  const double launch_ms = 1e3 * median_seconds(reps, [&] {
                             sim::launch(sim, {"empty", {blocks, 1, 1}, {threads, 1, 1}}, empty_kernel);
                           });
  const double barrier_ms = 1e3 * median_seconds(reps, [&] {
                              sim::launch(sim, {"barriers", {blocks, 1, 1}, {threads, 1, 1}}, barriers_kernel, rounds);
                            });
  Buffer sink(sim, DType::i32, 1);
  const double shuffle_ms = 1e3 * median_seconds(reps, [&] {
                              sim::launch(sim, {"shuffles", {blocks, 1, 1}, {threads, 1, 1}}, shuffles_kernel, rounds,
                                          static_cast<int*>(sink.data()));
                            });
  const double gpu_threads = double(blocks) * threads;
  const double per_thread_launch_ns = launch_ms * 1e6 / gpu_threads;
  const double per_barrier_ns = (barrier_ms - launch_ms) * 1e6 / (gpu_threads * rounds);
  const double per_shuffle_ns = (shuffle_ms - launch_ms) * 1e6 / (gpu_threads * rounds);

  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d", std::localtime(&now));
  const DeviceProperties props = sim.properties();
  std::printf("GPU simulator vs openmp, %s, %s\n%-40s %-8s %12s %12s %10s\n", props.name.c_str(), date, "op", "size",
              "sim ms", "openmp ms", "slowdown");
  for (const Row& r : rows) {
    std::printf("%-40s %-8s %12.3f %12.3f %9.0fx\n", r.name.c_str(), r.size.c_str(), r.sim_ms, r.peer_ms,
                r.sim_ms / r.peer_ms);
  }
  std::printf(
      "\nmachinery (%u blocks x %u threads): %.0f ns per GPU thread to launch and finish, %.1f ns per thread "
      "per barrier, %.1f ns per thread per shuffle\n",
      blocks, threads, per_thread_launch_ns, per_barrier_ns, per_shuffle_ns);
  const double stolen = bench::stolen_percent(ticks_at_start, bench::cpu_ticks());
  std::printf("%s\n", bench::stolen_text(stolen).c_str());
  if (!json_path.empty()) {
    std::FILE* f = std::fopen(json_path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "tandem_bench_sim: cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::fprintf(f, "{\n  \"benchmark\": \"tandem_bench_sim\",\n  \"date\": \"%s\",\n  \"machine\": \"%s\",\n", date,
                 props.name.c_str());
    std::fprintf(f, "  \"peer\": \"openmp (%s)\",\n", cpu.properties().name.c_str());
    if (stolen < 0) {
      std::fprintf(f, "  \"steal_percent\": null,\n  \"rows\": [\n");
    } else {
      std::fprintf(f, "  \"steal_percent\": %.2f,\n  \"rows\": [\n", stolen);
    }
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      std::fprintf(
          f, "    {\"op\": \"%s\", \"size\": \"%s\", \"sim_ms\": %.4f, \"openmp_ms\": %.4f, \"slowdown\": %.1f}%s\n",
          r.name.c_str(), r.size.c_str(), r.sim_ms, r.peer_ms, r.sim_ms / r.peer_ms, i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f,
                 "  ],\n  \"machinery\": {\"blocks\": %u, \"threads_per_block\": %u, \"launch_ns_per_thread\": %.1f, "
                 "\"barrier_ns_per_thread\": %.2f, \"shuffle_ns_per_thread\": %.2f}\n}\n",
                 blocks, threads, per_thread_launch_ns, per_barrier_ns, per_shuffle_ns);
    std::fclose(f);
  }
  return 0;
}
