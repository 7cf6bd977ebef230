// The backend registry: which backends are compiled in, which can run here, and the shared
// instance of each. Explicit (no self-registration) so that static linking keeps every backend.
#include "tandem/registry.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>

#include "factories.hpp"
#include "modules.hpp"
#include "tandem/errors.hpp"

namespace tandem {

namespace detail {
// The factories of the backends built into this library (cmake/TandemBackends.cmake).
#define TANDEM_BUILT_BACKEND(n, kind, auto) \
  int n##_device_count(std::string& why);   \
  std::shared_ptr<Backend> make_##n##_backend(int device);
#define TANDEM_ABSENT_BACKEND(n, kind, auto, why)
#define TANDEM_MODULE_BACKEND(n, kind, auto)
#include "tandem_backends.inc"
#undef TANDEM_BUILT_BACKEND
#undef TANDEM_ABSENT_BACKEND
#undef TANDEM_MODULE_BACKEND
}  // namespace detail

namespace {

struct Entry {
  const char* name;
  BackendKind kind;
  int auto_rank;  // its place in the order "auto" tries (1 first); 0: never
  bool built;
  const char* not_built_reason;  // when !built: how to get it
  std::function<int(std::string&)> device_count;
  std::function<std::shared_ptr<Backend>(int)> make;
  bool module = false;  // in libtandem-<name>.so, loaded on first use (modules.hpp)
};

// The rows of cmake/TandemBackends.cmake, in its order, which `tandem info` and --help follow.
// The simulators are never chosen by "auto": they are correctness tools, not fast paths.
const std::vector<Entry>& entries() {
  static const std::vector<Entry> list = {
#define TANDEM_BUILT_BACKEND(n, kind, auto) \
  {#n, BackendKind::kind, auto, true, "", detail::n##_device_count, detail::make_##n##_backend},
#define TANDEM_ABSENT_BACKEND(n, kind, auto, why) {#n, BackendKind::kind, auto, false, why, nullptr, nullptr},
#define TANDEM_MODULE_BACKEND(n, kind, auto)                              \
  {#n,                                                                    \
   BackendKind::kind,                                                     \
   auto,                                                                  \
   true,                                                                  \
   "",                                                                    \
   [](std::string& why) { return detail::module_device_count(#n, why); }, \
   [](int device) { return detail::module_make(#n, device); },            \
   true},
#include "tandem_backends.inc"
#undef TANDEM_BUILT_BACKEND
#undef TANDEM_ABSENT_BACKEND
#undef TANDEM_MODULE_BACKEND
  };
  return list;
}

std::string known_names() {
  std::string text;
  for (const auto& info : backends()) {
    if (!text.empty()) text += ", ";
    text += info.name;
    text += info.available ? " (available)" : " (unavailable: " + info.reason + ")";
  }
  return text;
}

// Splits "cuda:1" into ("cuda", 1); a bare name means device 0.
std::pair<std::string, int> parse_name(std::string_view full) {
  const auto colon = full.find(':');
  if (colon == std::string_view::npos) return {std::string(full), 0};
  int index = -1;
  const auto digits = full.substr(colon + 1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || end != digits.data() + digits.size() || index < 0) {
    throw BackendUnavailable("bad backend name '" + std::string(full) +
                             "': use NAME or NAME:DEVICE with DEVICE a number, e.g. cuda:1");
  }
  return {std::string(full.substr(0, colon)), index};
}

const Entry& find_entry(const std::string& name) {
  for (const auto& entry : entries()) {
    if (name == entry.name) return entry;
  }
  throw BackendUnavailable("unknown backend '" + name + "'; backends: " + known_names() +
                           "; or 'auto' for the best available");
}

// Resolves "auto" and checks the backend can run; returns (name, device).
std::pair<std::string, int> resolve(std::string_view requested) {
  const std::string full = (requested == "auto" || requested.empty()) ? auto_backend_name() : std::string(requested);
  auto [name, device] = parse_name(full);
  const Entry& entry = find_entry(name);
  if (!entry.built) throw BackendUnavailable("backend '" + name + "' is " + entry.not_built_reason);
  std::string reason;
  const int count = entry.device_count(reason);
  if (count == 0) throw BackendUnavailable("backend '" + name + "' cannot run here: " + reason);
  if (device >= count) {
    throw BackendUnavailable("backend '" + name + "' has " + std::to_string(count) + " device(s); device " +
                             std::to_string(device) + " does not exist (use " + name + ":0 .. " + name + ":" +
                             std::to_string(count - 1) + ")");
  }
  return {name, device};
}

// The shared instances. At exit, with TANDEM_DEBUG_MEMORY=1, lists buffers still alive.
struct SharedBackends {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<Backend>> by_name;
  ~SharedBackends() {
    for (auto& [name, backend] : by_name) {
      if (backend->tracks_allocations()) {
        const std::string report = backend->leak_report();
        if (!report.empty()) std::fputs(report.c_str(), stderr);
      }
    }
  }
};

SharedBackends& shared_backends() {
  static SharedBackends instance;
  return instance;
}

}  // namespace

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const auto& entry : entries()) names.emplace_back(entry.name);
  return names;
}

std::vector<BackendInfo> backends() {
  std::vector<BackendInfo> list;
  for (const auto& entry : entries()) {
    BackendInfo info;
    info.name = entry.name;
    info.kind = entry.kind;
    info.built = entry.built;
    if (!entry.built) {
      info.reason = entry.not_built_reason;
    } else {
      info.device_count = entry.device_count(info.reason);
      info.available = info.device_count > 0;
      if (entry.module) info.module = detail::module_path(entry.name);
    }
    list.push_back(std::move(info));
  }
  return list;
}

std::string auto_backend_name() {
  // In the auto order, probing each backend's devices only until one has some: a module further
  // down the order (or not in it) is not even opened.
  std::vector<const Entry*> order;
  for (const Entry& e : entries()) {
    if (e.auto_rank > 0 && e.built) order.push_back(&e);
  }
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) { return a->auto_rank < b->auto_rank; });
  for (const Entry* e : order) {
    std::string why;
    if (e->device_count(why) > 0) return e->name;
  }
  return "reference";
}

Backend& get_backend(std::string_view requested) {
  auto [name, device] = resolve(requested);
  const std::string key = name + ":" + std::to_string(device);
  auto& shared = shared_backends();
  std::lock_guard lock(shared.mutex);
  auto at = shared.by_name.find(key);
  // Made before it is stored: a backend whose construction throws leaves no empty slot behind.
  if (at == shared.by_name.end()) at = shared.by_name.emplace(key, find_entry(name).make(device)).first;
  return *at->second;
}

Backend& default_backend() {
  const char* env = std::getenv("TANDEM_BACKEND");
  if (env == nullptr || env[0] == '\0') return get_backend("auto");
  try {
    return get_backend(env);
  } catch (const BackendUnavailable& e) {
    throw BackendUnavailable(std::string("TANDEM_BACKEND=") + env + ": " + e.what());
  }
}

std::shared_ptr<Backend> create_backend(std::string_view requested) {
  auto [name, device] = resolve(requested);
  return find_entry(name).make(device);
}

Crossover crossover_for(std::string_view algorithm) {
  const char* path = std::getenv("TANDEM_CROSSOVER");
  if (path == nullptr || path[0] == '\0') return {};
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw DataError(std::string(path) + ": is a directory, not a crossover file (TANDEM_CROSSOVER)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(std::string(path) + ": cannot open the crossover file (TANDEM_CROSSOVER)");
  // A crossover file is a few lines: read up to 1 MiB (a device such as /dev/zero never ends, and
  // a line without an end would grow without bound).
  constexpr std::size_t kMaxBytes = std::size_t(1) << 20;
  std::string text(kMaxBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxBytes) {
    throw DataError(std::string(path) + ": more than 1 MiB; not a crossover file (TANDEM_CROSSOVER)");
  }
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const auto hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::string algo, backend, size, extra;
    if (!(fields >> algo)) continue;  // blank or comment
    if (!(fields >> backend >> size) || (fields >> extra) ||
        size.find_first_not_of("0123456789") != std::string::npos) {
      throw DataError(std::string(path) + ": line " + std::to_string(number) +
                      ": expected 'algorithm backend size' (e.g. 'matmul cuda 256'), got '" + line + "'");
    }
    std::uint64_t from = 0;
    if (std::from_chars(size.data(), size.data() + size.size(), from).ec != std::errc{} ||
        from > std::numeric_limits<std::size_t>::max()) {
      throw DataError(std::string(path) + ": line " + std::to_string(number) + ": the size " + size +
                      " is past what a size can hold (2^64 - 1)");
    }
    if (algo == algorithm) return {backend, static_cast<std::size_t>(from)};
  }
  return {};
}

Backend& backend_for(std::string_view algorithm, std::size_t size) {
  const Crossover x = crossover_for(algorithm);
  if (!x.backend.empty() && size >= x.from) {
    const std::string base = x.backend.substr(0, x.backend.find(':'));
    for (const auto& info : backends()) {
      if (info.name == base && info.available) return get_backend(x.backend);
    }
  }
  for (const auto& info : backends()) {
    if (info.name == "openmp" && info.available) return get_backend("openmp");
  }
  return get_backend("reference");
}

}  // namespace tandem
