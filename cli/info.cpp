// tandem info: what is compiled in, what can run here, and what the devices are.
#include <cstdio>
#include <sstream>
#include <string>

#include "args.hpp"
#include "cli.hpp"
#include "tandem/tandem.hpp"

namespace tandem::cli {

namespace {

std::string properties_json(const DeviceProperties& p) {
  std::ostringstream o;
  o << "{\"name\": " << json_string(p.name) << ", \"kind\": \"" << kind_name(p.kind)
    << "\", \"memory_bytes\": " << p.memory_bytes << ", \"compute_units\": " << p.compute_units
    << ", \"simd_width\": " << p.simd_width << ", \"shared_memory_per_block\": " << p.shared_memory_per_block
    << ", \"l1_cache_bytes\": " << p.l1_cache_bytes << ", \"l2_cache_bytes\": " << p.l2_cache_bytes
    << ", \"l3_cache_bytes\": " << p.l3_cache_bytes
    << ", \"shared_memory_per_multiprocessor\": " << p.shared_memory_per_multiprocessor
    << ", \"clock_mhz\": " << p.clock_mhz << ", \"memory_clock_mhz\": " << p.memory_clock_mhz
    << ", \"memory_bus_width_bits\": " << p.memory_bus_width_bits
    << ", \"memory_bandwidth_gbs\": " << p.memory_bandwidth_gbs
    << ", \"compute_capability\": " << json_string(p.compute_capability) << ", \"isa_features\": [";
  for (std::size_t i = 0; i < p.isa_features.size(); ++i) o << (i ? ", " : "") << json_string(p.isa_features[i]);
  o << "]}";
  return o.str();
}

std::string tiers_text(Backend& be, const char* sep) {
  std::string text;
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    text += std::string(text.empty() ? "" : sep) + std::string(name_of(t)) + ":";
    bool first = true;
    for (auto tier : be.matmul_tiers(t)) {
      text += std::string(first ? "" : ",") + std::string(name_of(tier));
      first = false;
    }
  }
  return text;
}

}  // namespace

int info_main(const std::vector<std::string>& args) {
  bool json = false;
  for (const auto& a : args) {
    if (a == "--json") {
      json = true;
    } else {
      std::fprintf(stderr, "tandem info: unknown option '%s' (options: --json)\n", a.c_str());
      return 2;
    }
  }
  const auto list = backends();
  const std::string chosen = auto_backend_name();
  if (json) {
    std::printf("{\"version\": \"%s\", \"auto\": %s, \"backends\": [", version_string, json_string(chosen).c_str());
    for (std::size_t i = 0; i < list.size(); ++i) {
      const auto& b = list[i];
      std::printf("%s\n  {\"name\": %s, \"built\": %s, \"available\": %s, \"reason\": %s, \"devices\": %d",
                  i ? "," : "", json_string(b.name).c_str(), b.built ? "true" : "false", b.available ? "true" : "false",
                  json_string(b.reason).c_str(), b.device_count);
      if (b.available) {
        Backend& be = get_backend(b.name);
        std::printf(", \"properties\": %s", properties_json(be.properties()).c_str());
      }
      std::printf("}");
    }
    std::printf("\n]}\n");
    return 0;
  }
  std::printf("tandem %s; 'auto' selects: %s\n\n", version_string, chosen.c_str());
  for (const auto& b : list) {
    if (!b.available) {
      std::printf("%-10s unavailable: %s\n", b.name.c_str(), b.reason.c_str());
      continue;
    }
    Backend& be = get_backend(b.name);
    const DeviceProperties p = be.properties();
    std::printf("%-10s available, %d device(s)\n", b.name.c_str(), b.device_count);
    std::printf("           device:        %s (%s)\n", p.name.c_str(), kind_name(p.kind));
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
    std::printf("           matmul tiers:  %s\n", tiers_text(be, "  ").c_str());
  }
  return 0;
}

}  // namespace tandem::cli
