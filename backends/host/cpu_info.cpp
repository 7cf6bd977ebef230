#include "cpu_info.hpp"

#include <cstdlib>
#include <fstream>
#include <string>

#include "host_backend.hpp"
#include "tandem/topology.hpp"

namespace tandem::host {

namespace {
std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) return "";
      const auto start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  }
  return "";
}
}  // namespace

std::string cpu_vendor() {
  static const std::string vendor = cpuinfo_field("vendor_id");
  return vendor;
}

std::string cpu_model_name() {
  static const std::string name = cpuinfo_field("model name");
  return name;
}

bool cpu_has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

bool cpu_has_avx512f() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");  // the kernel uses both
#else
  return false;
#endif
}

bool cpu_has_avx512bf16() {
#if defined(__x86_64__) || defined(__i386__)
  return cpu_has_avx512f() && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

DeviceProperties cpu_properties(int threads) {
  DeviceProperties p;
  p.name = cpu_model_name();
  if (p.name.empty()) p.name = "unknown CPU";
  p.kind = BackendKind::cpu;
  p.memory_bytes = physical_memory_bytes();
  p.compute_units = threads;
  const CpuTopology& topology = cpu_topology();  // sysfs, not sysconf (wrong on some VMs)
  p.l1_cache_bytes = topology.l1d_bytes;
  p.l2_cache_bytes = topology.l2_bytes;
  p.l3_cache_bytes = topology.l3_bytes;
  const std::string mhz = cpuinfo_field("cpu MHz");
  p.clock_mhz = static_cast<int>(std::strtod(mhz.c_str(), nullptr));  // 0 when absent or malformed
  p.simd_width = 1;
#if defined(__x86_64__) || defined(__i386__)
  const char* features[] = {"sse4.2",   "avx",      "avx2",       "fma",        "f16c",    "avx512f",
                            "avx512bw", "avx512vl", "avx512bf16", "avx512fp16", "amx-tile"};
  for (const char* f : features) {
    bool has = false;
    const std::string name = f;
    // __builtin_cpu_supports needs a literal; check the common ones, read the rest from /proc.
    if (name == "avx2")
      has = __builtin_cpu_supports("avx2");
    else if (name == "avx")
      has = __builtin_cpu_supports("avx");
    else if (name == "fma")
      has = __builtin_cpu_supports("fma");
    else if (name == "sse4.2")
      has = __builtin_cpu_supports("sse4.2");
    else if (name == "avx512f")
      has = __builtin_cpu_supports("avx512f");
    else if (name == "avx512bw")
      has = __builtin_cpu_supports("avx512bw");
    else if (name == "avx512vl")
      has = __builtin_cpu_supports("avx512vl");
    else {
      static const std::string flags = cpuinfo_field("flags").append(" ");
      std::string needle;
      for (char c : name) needle.push_back(c == '-' ? '_' : c);
      needle.push_back(' ');
      const auto at = flags.find(needle);
      has = at != std::string::npos && (at == 0 || flags[at - 1] == ' ');
    }
    if (has) p.isa_features.push_back(name);
  }
  p.simd_width = cpu_has_avx512f() ? 16 : cpu_has_avx2_fma() ? 8 : 4;
#endif
  return p;
}

}  // namespace tandem::host
