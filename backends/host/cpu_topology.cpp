// The CPU's caches and cores from sysfs (tandem/topology.hpp).
#include <cctype>
#include <fstream>
#include <optional>
#include <set>
#include <utility>

#include "tandem/errors.hpp"
#include "tandem/topology.hpp"

namespace tandem {
namespace {

// The first line of a file without surrounding blanks; nullopt when it cannot be read.
std::optional<std::string> read_line(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);
  const auto first = line.find_first_not_of(" \t\r");
  if (first == std::string::npos) return std::string();
  return line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
}

[[noreturn]] void malformed(const std::string& path, const std::string& text, const char* expected) {
  throw DataError(path + ": '" + text + "' is not " + expected);
}

std::size_t parse_number(const std::string& path, const std::string& text, std::size_t& pos) {
  if (pos >= text.size() || !std::isdigit(static_cast<unsigned char>(text[pos]))) {
    malformed(path, text, "a list of CPU numbers");
  }
  std::size_t n = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    if (n > (std::size_t(1) << 40)) malformed(path, text, "a list of CPU numbers");
    n = n * 10 + static_cast<std::size_t>(text[pos++] - '0');
  }
  return n;
}

// A CPU list such as "0-3,8,10-11" (the empty list is empty).
std::vector<int> parse_cpu_list(const std::string& path, const std::string& text) {
  std::vector<int> cpus;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t first = parse_number(path, text, pos);
    std::size_t last = first;
    if (pos < text.size() && text[pos] == '-') {
      ++pos;
      last = parse_number(path, text, pos);
    }
    if (last < first || last >= 65536) malformed(path, text, "a list of CPU numbers");
    for (std::size_t c = first; c <= last; ++c) cpus.push_back(static_cast<int>(c));
    if (pos < text.size()) {
      if (text[pos] != ',') malformed(path, text, "a list of CPU numbers");
      ++pos;
    }
  }
  return cpus;
}

// "32K", "1024K", "32M", or bytes.
std::size_t parse_size(const std::string& path, const std::string& text) {
  std::size_t pos = 0;
  std::size_t n = parse_number(path, text, pos);
  const std::string unit = text.substr(pos);
  if (unit == "K") {
    n <<= 10;
  } else if (unit == "M") {
    n <<= 20;
  } else if (unit == "G") {
    n <<= 30;
  } else if (!unit.empty()) {
    malformed(path, text, "a cache size such as 32K or 16M");
  }
  return n;
}

}  // namespace

CpuTopology read_cpu_topology(const std::string& dir) {
  CpuTopology t;
  t.source = dir;
  const auto online = read_line(dir + "/online");
  const std::vector<int> cpus = online ? parse_cpu_list(dir + "/online", *online) : std::vector<int>{0};
  t.logical_cpus = online ? static_cast<int>(cpus.size()) : 0;
  std::set<std::pair<std::string, std::string>> cores;
  std::set<std::string> packages;
  for (int cpu : cpus) {
    const std::string base = dir + "/cpu" + std::to_string(cpu) + "/topology/";
    const auto core = read_line(base + "core_id"), package = read_line(base + "physical_package_id");
    if (!core || !package) continue;
    cores.emplace(*package, *core);
    packages.insert(*package);
  }
  t.cores = static_cast<int>(cores.size());
  t.packages = static_cast<int>(packages.size());
  for (int index = 0; index < 32; ++index) {
    const std::string base = dir + "/cpu0/cache/index" + std::to_string(index) + "/";
    const auto level = read_line(base + "level"), type = read_line(base + "type"), size = read_line(base + "size");
    if (!level || !type || !size) break;
    CacheInfo c;
    std::size_t pos = 0;
    c.level = static_cast<int>(parse_number(base + "level", *level, pos));
    if (pos != level->size() || c.level < 1 || c.level > 8) malformed(base + "level", *level, "a cache level (1-8)");
    c.type = *type;
    c.bytes = parse_size(base + "size", *size);
    if (const auto shared = read_line(base + "shared_cpu_list")) {
      c.shared_by = static_cast<int>(parse_cpu_list(base + "shared_cpu_list", *shared).size());
    }
    if (c.type != "Instruction") {
      std::size_t& slot = c.level == 1 ? t.l1d_bytes : c.level == 2 ? t.l2_bytes : t.l3_bytes;
      if (c.level <= 3) slot = c.bytes;
    }
    t.caches.push_back(std::move(c));
  }
  if (!online && t.caches.empty()) t.source = dir + " (not readable: no topology)";
  return t;
}

const CpuTopology& cpu_topology() {
  static const CpuTopology t = [] {
    try {
      return read_cpu_topology();
    } catch (const DataError& e) {
      CpuTopology none;  // a kernel that writes sysfs oddly must not stop tandem: sizes stay unknown
      none.source = e.what();
      return none;
    }
  }();
  return t;
}

}  // namespace tandem
