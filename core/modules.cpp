// Backend modules: libtandem-<name>.so is looked for in the folders of TANDEM_BACKEND_PATH (':'
// between them), then beside libtandem (a build tree), then in its tandem/ folder (an install's
// lib/tandem/). The first file found is the one used: a module that fails to load makes its
// backend unavailable with the loader's reason, and another copy further down the path is not
// tried in its place (that would hide which one a user's setting picked). Loaded once per
// process and never unloaded: the backends it made may live until exit.
#include "modules.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "module_abi.hpp"
#include "tandem/environment.hpp"
#include "tandem/errors.hpp"

namespace tandem::detail {

namespace {

struct Loaded {
  std::string path;   // the module file found, "" when none
  std::string error;  // why it cannot be used, "" when it can
  const ModuleTable* table = nullptr;
};

// The folder of the shared library this function is in (libtandem), "" when unknown.
std::string library_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&library_folder), &info) == 0 || info.dli_fname == nullptr) return "";
  char* resolved = ::realpath(info.dli_fname, nullptr);  // "/opt/t/lib", not "/opt/t/bin/../lib"
  const std::string file = resolved != nullptr ? resolved : info.dli_fname;
  std::free(resolved);
  const auto slash = file.rfind('/');
  return slash == std::string::npos ? "." : file.substr(0, slash);
}

std::vector<std::string> search_folders() {
  std::vector<std::string> folders;
  if (const auto path = env::text("TANDEM_BACKEND_PATH")) {
    std::size_t from = 0;
    while (from <= path->size()) {
      const std::size_t colon = std::min(path->find(':', from), path->size());
      if (colon > from) folders.push_back(path->substr(from, colon - from));
      from = colon + 1;
    }
  }
  if (const std::string here = library_folder(); !here.empty()) {
    folders.push_back(here);
    folders.push_back(here + "/tandem");
  }
  return folders;
}

Loaded load(const std::string& name) {
  Loaded r;
  const std::string file = "libtandem-" + name + ".so";
  const std::vector<std::string> folders = search_folders();
  for (const std::string& folder : folders) {
    const std::string candidate = folder + "/" + file;
    if (::access(candidate.c_str(), F_OK) == 0) {
      r.path = candidate;
      break;
    }
  }
  if (r.path.empty()) {
    std::string looked;
    for (const std::string& folder : folders) looked += (looked.empty() ? "" : ", ") + folder;
    r.error = file + " not found (looked in " + looked +
              "); install it beside libtandem or name its folder in TANDEM_BACKEND_PATH";
    return r;
  }
  void* handle = ::dlopen(r.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    // The loader names the module only for some failures (not for a missing dependency).
    const char* text = ::dlerror();  // read once: a second call returns null
    const std::string why = text != nullptr ? text : "cannot be loaded";
    r.error = why.rfind(r.path, 0) == 0 ? why : r.path + ": " + why;
    return r;
  }
  using AbiFn = int (*)();
  using TableFn = const ModuleTable* (*)();
  auto abi = reinterpret_cast<AbiFn>(::dlsym(handle, "tandem_module_abi"));
  if (abi == nullptr) {
    r.error = r.path + ": not a tandem backend module (it has no tandem_module_abi)";
  } else if (const int got = abi(); got != kModuleAbi) {
    r.error = r.path + ": module ABI " + std::to_string(got) + ", but this libtandem loads ABI " +
              std::to_string(kModuleAbi) + "; use the module built with this tandem";
  } else if (auto table_of = reinterpret_cast<TableFn>(::dlsym(handle, "tandem_module_table")); table_of == nullptr) {
    r.error = r.path + ": not a tandem backend module (it has no tandem_module_table)";
  } else if (const ModuleTable* t = table_of(); t == nullptr || t->name == nullptr || name != t->name) {
    r.error = r.path + ": holds the backend '" + std::string(t && t->name ? t->name : "?") + "', not '" + name + "'";
  } else if (t->contract == nullptr || std::string(t->contract) != TANDEM_MODULE_CONTRACT) {
    r.error = r.path + ": built from other tandem headers (contract " + (t->contract ? t->contract : "?") +
              ", this libtandem " + TANDEM_MODULE_CONTRACT + "); use the module built with this tandem";
  } else {
    r.table = t;
    return r;
  }
  ::dlclose(handle);  // refused: nothing of it is in use
  return r;
}

const Loaded& loaded(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, Loaded>* modules = new std::map<std::string, Loaded>;  // never destroyed
  std::lock_guard lock(mutex);
  auto at = modules->find(name);
  if (at == modules->end()) at = modules->emplace(name, load(name)).first;
  return at->second;
}

}  // namespace

int module_device_count(const char* name, std::string& why) {
  const Loaded& m = loaded(name);
  if (m.table == nullptr) {
    why = m.error;
    return 0;
  }
  return m.table->device_count(why);
}

std::shared_ptr<Backend> module_make(const char* name, int device) {
  const Loaded& m = loaded(name);
  if (m.table == nullptr) throw BackendUnavailable("backend '" + std::string(name) + "' cannot run here: " + m.error);
  return m.table->make(device);
}

std::string module_path(const char* name) { return loaded(name).path; }

}  // namespace tandem::detail
