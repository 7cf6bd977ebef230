// tandem bench bandwidth: host <-> device copies from pageable and from pinned memory, 1 KB to
// 1 GB, like CUDA's bandwidthTest. tandem bench memory: read bandwidth of the CPU's memory
// hierarchy by working-set size, the levels (L1, L2, L3, RAM) measured instead of drawn, with the
// cache sizes the OS reports and the host-device link beside them.
#ifdef _OPENMP
#include <omp.h>
#else
inline int omp_get_thread_num() { return 0; }
inline int omp_get_num_threads() { return 1; }
inline int omp_get_max_threads() { return 1; }
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "levels.hpp"
#include "sweep.hpp"
#include "tandem/detail/timing.hpp"
#include "tandem/tandem.hpp"

namespace tandem::cli {
namespace {

using Clock = std::chrono::steady_clock;
double since_ms(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Median of repeated timings (ms) of f, until ~50 ms have passed (3 to 50 runs), after a warm-up.
template <class F>
double median_ms(F&& f) {
  f();
  return detail::repeat_median([&] { return detail::host_ms(f); }, 3, 50, 50).median_ms;
}

std::string bytes_text(std::size_t b) {
  char buf[32];
  if (b >= (std::size_t(1) << 30)) {
    std::snprintf(buf, sizeof buf, "%zu GiB", b >> 30);
  } else if (b >= (std::size_t(1) << 20)) {
    std::snprintf(buf, sizeof buf, "%zu MiB", b >> 20);
  } else {
    std::snprintf(buf, sizeof buf, "%zu KiB", b >> 10);
  }
  return buf;
}

// The data caches of CPU 0 as sysfs reports them (level and bytes of one instance).
std::vector<std::pair<std::string, std::size_t>> cache_sizes() {
  std::vector<std::pair<std::string, std::size_t>> out;
  for (const CacheInfo& c : cpu_topology().caches) {
    if (c.type != "Instruction") out.emplace_back("L" + std::to_string(c.level), c.bytes);
  }
  return out;
}

// Read bandwidth (GB/s) over a working set of `bytes`: every thread sums its share `passes`
// times inside one parallel region (so that small sets measure the cache, not the fork).
double read_gbps(const float* data, std::size_t bytes) {
  const std::size_t n = bytes / sizeof(float);
  const std::size_t passes = std::max<std::size_t>(1, (std::size_t(256) << 20) / bytes);
  volatile float sink = 0;
  const double ms = median_ms([&] {
    float total = 0;
#pragma omp parallel reduction(+ : total)
    {
      const auto t = static_cast<std::size_t>(omp_get_thread_num());
      const auto nt = static_cast<std::size_t>(omp_get_num_threads());
      const std::size_t begin = n * t / nt, end = n * (t + 1) / nt;
      float acc[16] = {};
      for (std::size_t p = 0; p < passes; ++p) {
        std::size_t i = begin;
        for (; i + 16 <= end; i += 16) {
#pragma omp simd
          for (int k = 0; k < 16; ++k) acc[k] += data[i + std::size_t(k)];
        }
        for (; i < end; ++i) acc[0] += data[i];
      }
      for (float a : acc) total += a;
    }
    sink = sink + total;
  });
  return double(bytes) * double(passes) / (ms * 1e6);
}

// Read bandwidth at working sets from `smallest` to `largest` bytes, doubling: each row printed
// (unless quiet) with a mark where the bandwidth falls by 30% or more (a level ends), and
// returned as the JSON rows of the "memory" array.
template <class Measure>
Json working_set_rows(std::size_t smallest, std::size_t largest, bool quiet, Measure&& gbps_at) {
  Json rows = Json::array();
  double previous = 0;
  for (std::size_t bytes = smallest; bytes <= largest; bytes *= 2) {
    const double gbps = gbps_at(bytes);
    if (!quiet) {
      const bool drop = previous > 0 && gbps < 0.7 * previous;
      std::printf("%12s %10.1f%s\n", bytes_text(bytes).c_str(), gbps, drop ? "   <- a level ends" : "");
      std::fflush(stdout);
    }
    previous = gbps;
    rows.push_back({{"bytes", bytes}, {"read_gbps", number(gbps)}});
  }
  return rows;
}

// Median of `reps` event-timed runs (ms) of f on the backend's default queue, `before` run
// untimed ahead of each.
template <class B, class F>
double event_median_ms(Backend& be, int reps, B&& before, F&& f) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    before();
    const Event a = be.record_event(Queue{});
    f();
    const Event b = be.record_event(Queue{});
    ms.push_back(be.elapsed_ms(a, b));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// `tandem bench memory --backend GPU`: the device's levels, by the read probe (Backend::read_probe)
// over working sets from 256 KiB to most of its memory, with shared memory and the host-device
// link (pinned, 64 MiB) beside them. Every run's sum is checked: each element read `passes` times.
int gpu_memory(Backend& be, const LevelArgs& a) {
  const bool full = a.full;
  const DeviceProperties props = be.properties();
  const bool quiet = a.json.to_stdout();
  const bool simulator = props.kind == BackendKind::simulator;
  // The simulator runs kernels on the CPU: a few small sets show that the probe works, no more.
  const std::size_t free_now = be.device_free_bytes();
  std::size_t largest = simulator ? (std::size_t(1) << 20) : (full ? (std::size_t(4) << 30) : (std::size_t(1) << 30));
  while (largest > (std::size_t(1) << 20) && largest > free_now / 4) largest /= 2;
  const double target = simulator ? double(std::size_t(1) << 20) : double(std::size_t(2) << 30);  // bytes per run
  const int reps = simulator ? 1 : 5;
  const std::size_t n = largest / sizeof(float);
  Buffer data(be, DType::f32, n), sink(be, DType::f32, 1);
  data.fill(1.0);
  sweep::warm_up(be);
  // Runs the probe, checks its sum, returns GB/s.
  auto probe = [&](std::size_t bytes, unsigned passes, unsigned per_block, double read_bytes) {
    const double ms = event_median_ms(
        be, reps, [&] { sink.fill(0); },
        [&] { be.read_probe(Queue{}, data.data(), bytes, passes, per_block, sink.data()); });
    const double want = read_bytes / sizeof(float);
    const double got = sink.to_vector<float>()[0];
    if (!(std::fabs(got - want) <= 1e-3 * want)) {
      throw DeviceError("the memory probe on " + be.name() + " summed " + std::to_string(got) + " where it read " +
                        std::to_string(want) +
                        " ones: it skipped or repeated reads, and its timing would mean nothing");
    }
    return read_bytes / (ms * 1e6);
  };
  const unsigned blocks = be.probe_blocks();
  const unsigned per_block =
      static_cast<unsigned>(std::min<std::size_t>(8192, std::max<std::size_t>(1, props.shared_memory_per_block / 8)));
  const unsigned shared_passes = simulator ? 2 : 2000;
  const double shared_gbps =
      probe(largest, shared_passes, per_block, double(blocks) * per_block * sizeof(float) * shared_passes);
  // The host-device link: a pinned upload of 64 MiB (less on the simulator).
  const std::size_t link_bytes = std::min<std::size_t>(largest, std::size_t(64) << 20);
  HostBuffer staging(be, DType::f32, link_bytes / sizeof(float));
  std::fill(staging.span<float>().begin(), staging.span<float>().end(), 1.0f);
  const double link_ms = event_median_ms(
      be, reps, [] {}, [&] { be.copy_to_device_async(Queue{}, data.data(), staging.data(), link_bytes); });
  const double link_gbps = double(link_bytes) / (link_ms * 1e6);
  if (!quiet) {
    std::printf("%s (%s) read bandwidth by working set: %u blocks of 256 threads\n", be.name().c_str(),
                props.name.c_str(), blocks);
    if (simulator)
      std::printf("(the simulator runs kernels on the CPU: this shows that the probe works, not a GPU's speed)\n");
    std::printf("L2 %s, shared memory per block %s\n", bytes_text(props.l2_cache_bytes).c_str(),
                bytes_text(props.shared_memory_per_block).c_str());
    std::printf("%12s %10s\n", "working set", "GB/s");
  }
  Json caches = Json::array();
  if (props.l2_cache_bytes > 0) caches.push_back({{"level", "L2"}, {"bytes", props.l2_cache_bytes}});
  Json json{{"command", "tandem bench memory --backend " + be.name()},
            {"date", today()},
            {"backend", be.name()},
            {"device", props.name},
            {"threads", std::size_t(blocks) * 256},
            {"caches", caches},
            {"shared_gbps", number(shared_gbps)},
            {"link_gbps", number(link_gbps)}};
  json["memory"] =
      working_set_rows(simulator ? 4096 : (std::size_t(256) << 10), largest, quiet, [&](std::size_t bytes) {
        const unsigned passes = static_cast<unsigned>(std::max(1.0, target / double(bytes)));
        return probe(bytes, passes, 0, double(bytes) * passes);
      });
  if (!quiet) {
    std::printf("%12s %10.1f   (each block's %s read from on-chip shared memory)\n", "shared", shared_gbps,
                bytes_text(std::size_t(per_block) * sizeof(float)).c_str());
    std::printf("%12s %10.1f   (host to device, pinned, %s)\n", "link", link_gbps, bytes_text(link_bytes).c_str());
  }
  a.json.write(json);
  if (!a.plot.empty()) sweep::plot_json(json, a.plot, "memory.json");
  return 0;
}

}  // namespace

int bench_bandwidth(const LevelArgs& a) {
  const bool full = a.full;
  Backend& be = a.backend.empty() ? default_backend() : get_backend(a.backend);
  const DeviceProperties props = be.properties();
  const bool quiet = a.json.to_stdout();
  const std::size_t largest = full ? (std::size_t(1) << 30) : (std::size_t(64) << 20);
  sweep::warm_up(be);
  Json rows = Json::array();
  if (!quiet) {
    std::printf(
        "host <-> %s (%s) copy bandwidth, GB/s%s\n", be.name().c_str(), props.name.c_str(),
        props.kind == BackendKind::cpu ? " (a CPU backend's device memory is host memory: these are memcpy)" : "");
    std::printf("%10s %16s %14s %16s %14s\n", "size", "to device page", "to device pin", "to host page", "to host pin");
  }
  for (std::size_t bytes = 1024; bytes <= largest; bytes *= 4) {
    const std::size_t n = bytes / 4;
    std::vector<float> pageable(n, 1.0f);
    HostBuffer pinned(be, DType::f32, n);
    std::fill(pinned.span<float>().begin(), pinned.span<float>().end(), 1.0f);
    Buffer d(be, DType::f32, n);
    const double up_page = median_ms([&] { d.upload(pageable); });
    const double up_pin = median_ms([&] {
      be.copy_to_device_async(Queue{}, d.data(), pinned.data(), bytes);
      be.synchronize(Queue{});
    });
    const double down_page = median_ms([&] { d.download(std::span<float>(pageable)); });
    const double down_pin = median_ms([&] {
      be.copy_to_host_async(Queue{}, pinned.data(), d.data(), bytes);
      be.synchronize(Queue{});
    });
    const auto gbps = [&](double ms) { return double(bytes) / (ms * 1e6); };
    if (!quiet) {
      std::printf("%10s %16.2f %14.2f %16.2f %14.2f%s\n", bytes_text(bytes).c_str(), gbps(up_page), gbps(up_pin),
                  gbps(down_page), gbps(down_pin), pinned.is_pinned() ? "" : "  (no page-locked memory here)");
      std::fflush(stdout);
    }
    rows.push_back({{"bytes", bytes},
                    {"to_device_pageable_gbps", number(gbps(up_page))},
                    {"to_device_pinned_gbps", number(gbps(up_pin))},
                    {"to_host_pageable_gbps", number(gbps(down_page))},
                    {"to_host_pinned_gbps", number(gbps(down_pin))},
                    {"pinned", pinned.is_pinned()}});
  }
  const Json json{{"command", "tandem bench bandwidth"},
                  {"date", today()},
                  {"backend", be.name()},
                  {"device", props.name},
                  {"bandwidth", rows}};
  a.json.write(json);
  if (!a.plot.empty()) sweep::plot_json(json, a.plot, "bandwidth.json");
  return 0;
}

int bench_memory(const LevelArgs& a) {
  const bool full = a.full;
  if (!a.backend.empty()) {
    Backend& be = get_backend(a.backend);
    if (be.properties().kind != BackendKind::cpu) return gpu_memory(be, a);
    // A CPU backend's memory is the host's: the host loop below measures it.
  }
  const bool quiet = a.json.to_stdout();
  const std::size_t largest = full ? (std::size_t(4) << 30) : (std::size_t(256) << 20);
  const auto caches = cache_sizes();
  // One allocation, first-touched by the threads that read it.
  const std::size_t n = largest / sizeof(float);
  std::vector<float> data(n);
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < n; ++i) data[i] = 1.0f;
  // A quarter second of reads first: every core awake before anything is measured.
  for (const auto t0 = Clock::now(); since_ms(t0) < 250;)
    (void)read_gbps(data.data(), std::min(largest, std::size_t(4) << 20));
  if (!quiet) {
    std::printf("CPU read bandwidth by working set, %d threads (%s)\n", omp_get_max_threads(),
                get_backend("reference").properties().name.c_str());
    std::printf("caches the OS reports per core or shared:");
    for (const auto& [level, bytes] : caches) std::printf(" %s %s", level.c_str(), bytes_text(bytes).c_str());
    std::printf("\n%12s %10s\n", "working set", "GB/s");
  }
  Json cache_rows = Json::array();
  for (const auto& [level, bytes] : caches) cache_rows.push_back({{"level", level}, {"bytes", bytes}});
  Json json{{"command", "tandem bench memory"},
            {"date", today()},
            {"threads", omp_get_max_threads()},
            {"caches", cache_rows}};
  json["memory"] =
      working_set_rows(4096, largest, quiet, [&](std::size_t bytes) { return read_gbps(data.data(), bytes); });
  a.json.write(json);
  if (!a.plot.empty()) sweep::plot_json(json, a.plot, "memory.json");
  return 0;
}

}  // namespace tandem::cli
