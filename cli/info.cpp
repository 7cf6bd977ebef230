// tandem info: what is compiled in, what can run here, and what the devices are.
#include <cstdio>
#include <memory>
#include <string>

#include "options.hpp"
#include "tandem/tandem.hpp"

namespace tandem::cli {
namespace {

struct InfoArgs {
  JsonOption json;
};

Json properties_json(const DeviceProperties& p) {
  return Json{{"name", p.name},
              {"kind", name_of(p.kind)},
              {"memory_bytes", p.memory_bytes},
              {"compute_units", p.compute_units},
              {"simd_width", p.simd_width},
              {"shared_memory_per_block", p.shared_memory_per_block},
              {"l1_cache_bytes", p.l1_cache_bytes},
              {"l2_cache_bytes", p.l2_cache_bytes},
              {"l3_cache_bytes", p.l3_cache_bytes},
              {"shared_memory_per_multiprocessor", p.shared_memory_per_multiprocessor},
              {"clock_mhz", p.clock_mhz},
              {"memory_clock_mhz", p.memory_clock_mhz},
              {"memory_bus_width_bits", p.memory_bus_width_bits},
              {"memory_bandwidth_gbs", number(p.memory_bandwidth_gbs)},
              {"compute_capability", p.compute_capability},
              {"isa_features", p.isa_features},
              {"tuning", [&] {
                 Json t = Json::object();
                 for (const auto& [k, v] : p.tuning) t[k] = v;
                 return t;
               }()}};
}

Json topology_json(const CpuTopology& t) {
  Json caches = Json::array();
  for (const CacheInfo& c : t.caches) {
    caches.push_back({{"level", c.level}, {"type", c.type}, {"bytes", c.bytes}, {"shared_by", c.shared_by}});
  }
  return Json{{"logical_cpus", t.logical_cpus},
              {"cores", t.cores},
              {"packages", t.packages},
              {"caches", caches},
              {"source", t.source}};
}

std::string tiers_text(Backend& be) {
  std::string text;
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    text += std::string(text.empty() ? "" : "  ") + std::string(name_of(t)) + ":";
    bool first = true;
    for (auto tier : be.matmul_tiers(t)) {
      text += std::string(first ? "" : ",") + std::string(name_of(tier));
      first = false;
    }
  }
  return text;
}

// The backends that run the kernels of backends/gpu/kernels: the GPUs and their simulators.
bool runs_gpu_kernels(const BackendInfo& b) { return b.kind != BackendKind::cpu; }

Json provenance_json(const KernelProvenance& k) {
  Json runs = Json::array();
  for (const auto& r : k.runs) {
    runs.push_back({{"device", r.device},
                    {"driver", r.driver},
                    {"date", r.date},
                    {"commit", r.commit},
                    {"check", r.check},
                    {"sources_hash", r.sources_hash},
                    {"same_sources", r.changed.empty()},
                    {"changed_since", r.changed}});
  }
  return Json{{"sources_hash", k.sources_hash}, {"hardware_runs", runs}, {"lookback_verified", k.lookback_verified}};
}

std::string size_text(std::size_t bytes) {
  if (bytes >= (std::size_t(1) << 20) && bytes % (std::size_t(1) << 20) == 0) {
    return std::to_string(bytes >> 20) + " MiB";
  }
  return std::to_string(bytes >> 10) + " KiB";
}

void print_text(const std::vector<BackendInfo>& list, const std::string& chosen) {
  std::printf("tandem %s; 'auto' selects: %s\n", version_string, chosen.c_str());
  const CpuTopology& t = cpu_topology();
  std::printf("host CPU: %d logical CPUs, %d cores, %d package(s); caches of CPU 0:", t.logical_cpus, t.cores,
              t.packages);
  for (const CacheInfo& c : t.caches) {
    std::printf(" L%d%s %s (shared by %d)", c.level,
                c.type == "Data"          ? "d"
                : c.type == "Instruction" ? "i"
                                          : "",
                size_text(c.bytes).c_str(), c.shared_by);
  }
  std::printf("%s\n\n", t.caches.empty() ? (" unknown (" + t.source + ")").c_str() : "");
  for (const auto& b : list) {
    if (!b.available) {
      std::printf("%-10s unavailable: %s\n", b.name.c_str(), b.reason.c_str());
      if (!b.module.empty() && b.reason.find(b.module) == std::string::npos) {
        std::printf("           module:        %s\n", b.module.c_str());
      }
      continue;
    }
    Backend& be = get_backend(b.name);
    const DeviceProperties p = be.properties();
    std::printf("%-10s available, %d device(s)\n", b.name.c_str(), b.device_count);
    if (!b.module.empty()) std::printf("           module:        %s\n", b.module.c_str());
    std::printf("           device:        %s (%s)\n", p.name.c_str(), std::string(name_of(p.kind)).c_str());
    std::printf("           memory:        %.1f GiB\n", p.memory_bytes / double(1 << 30));
    std::printf("           compute units: %d, simd/warp width: %d (f32 lanes)\n", p.compute_units, p.simd_width);
    std::printf("           caches:        L1 %zu KiB, L2 %zu KiB, L3 %zu KiB\n", p.l1_cache_bytes >> 10,
                p.l2_cache_bytes >> 10, p.l3_cache_bytes >> 10);
    if (p.clock_mhz) std::printf("           clock:         %d MHz\n", p.clock_mhz);
    if (p.kind != BackendKind::cpu) {
      std::printf("           shared memory: %zu KiB per block, %zu KiB per multiprocessor\n",
                  p.shared_memory_per_block >> 10, p.shared_memory_per_multiprocessor >> 10);
    }
    if (p.memory_bus_width_bits) {
      std::printf("           memory bus:    %d bits at %d MHz: %.0f GB/s theoretical\n", p.memory_bus_width_bits,
                  p.memory_clock_mhz, p.memory_bandwidth_gbs);
    }
    if (!p.compute_capability.empty()) std::printf("           capability:    %s\n", p.compute_capability.c_str());
    std::string isa;
    for (const auto& f : p.isa_features) isa += (isa.empty() ? "" : " ") + f;
    std::printf("           features:      %s\n", isa.empty() ? "-" : isa.c_str());
    std::printf("           matmul tiers:  %s\n", tiers_text(be).c_str());
    for (const auto& [k, v] : p.tuning) std::printf("           tuning:        %s: %s\n", k.c_str(), v.c_str());
    if (runs_gpu_kernels(b)) {
      std::string text;  // the summary's lines under this column
      for (char c : gpu_kernel_provenance().summary()) text += c == '\n' ? std::string("\n") + std::string(24, ' ') : std::string(1, c);
      std::printf("           kernels:       %s\n", text.c_str());
    }
  }
}

int run_info(const InfoArgs& a) {
  const auto list = backends();
  const std::string chosen = auto_backend_name();
  if (!a.json.to_stdout()) print_text(list, chosen);
  if (!a.json.wanted()) return 0;
  Json doc{{"command", "info"}, {"version", version_string}, {"auto", chosen}, {"host", topology_json(cpu_topology())}};
  Json entries = Json::array();
  for (const auto& b : list) {
    Json entry{{"name", b.name},     {"kind", name_of(b.kind)}, {"built", b.built}, {"available", b.available},
               {"reason", b.reason}, {"module", b.module}, {"devices", b.device_count}};
    if (b.available) entry["properties"] = properties_json(get_backend(b.name).properties());
    if (runs_gpu_kernels(b)) entry["kernels"] = provenance_json(gpu_kernel_provenance());
    entries.push_back(std::move(entry));
  }
  doc["backends"] = std::move(entries);
  a.json.write(doc);
  return 0;
}

}  // namespace

Command add_info(CLI::App& app) {
  auto a = std::make_shared<InfoArgs>();
  CLI::App* sub = app.add_subcommand(
      "info",
      "backends compiled in, whether each can run here (and why not), the host CPU's caches and cores, and "
      "the properties of each available device");
  a->json.add(sub, "the same");
  return {sub, [a] { return run_info(*a); }};
}

}  // namespace tandem::cli
