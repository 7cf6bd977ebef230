// Backend modules: libtandem-<name>.so is looked for in the folders of TANDEM_BACKEND_PATH (':'
// between them), then beside libtandem (a build tree), then in its tandem/ folder (an install's
// lib/tandem/). The first entry of that name is the one used, whatever it is (a dangling or
// looping symbolic link included): a module that fails to load makes its backend unavailable with
// the reason, and another copy further down the path is not tried in its place (that would hide
// which one a user's setting picked). Before dlopen the file is checked to be a whole 64-bit ELF
// shared library (a truncated one is mapped past its end, and the first touch of a missing page
// kills the process with SIGBUS). Loaded on first use of its backend, once per process, and never
// unloaded: the backends it made may live until exit.
#include "modules.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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

// Why `path` cannot be a module ("" when it can be handed to dlopen): what it is, and whether
// every part of it the loader maps lies inside the file.
std::string damage_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ELOOP) return "a loop of symbolic links";
    if (errno == ENOENT) return "a symbolic link to a file that does not exist";
    return std::string("cannot be read (") + std::strerror(errno) + ")";
  }
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::string("cannot be opened (") + std::strerror(errno) + ")";
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } close_it{fd};
  Elf64_Ehdr eh{};
  if (size < sizeof eh || ::pread(fd, &eh, sizeof eh, 0) != ssize_t(sizeof eh)) {
    return "too short to be a shared library (" + std::to_string(size) + " bytes)";
  }
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return "not an ELF file";
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_DYN) return "not a 64-bit ELF shared library";
  const std::string truncated = "truncated: it is " + std::to_string(size) + " bytes, and ";
  const auto end_of = [](std::uint64_t offset, std::uint64_t count, std::uint64_t each) {
    return count > (UINT64_MAX - offset) / std::max<std::uint64_t>(each, 1) ? UINT64_MAX : offset + count * each;
  };
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || end_of(eh.e_phoff, eh.e_phnum, eh.e_phentsize) > size) {
    return truncated + "its program headers are not all in it";
  }
  if (end_of(eh.e_shoff, eh.e_shnum, eh.e_shentsize) > size) {
    return truncated + "its section headers end at byte " + std::to_string(end_of(eh.e_shoff, eh.e_shnum, eh.e_shentsize));
  }
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph{};
    if (::pread(fd, &ph, sizeof ph, off_t(eh.e_phoff + i * sizeof ph)) != ssize_t(sizeof ph)) {
      return "cannot be read (" + std::string(std::strerror(errno)) + ")";
    }
    if (ph.p_type == PT_LOAD && end_of(ph.p_offset, ph.p_filesz, 1) > size) {
      return truncated + "its code and data reach byte " + std::to_string(end_of(ph.p_offset, ph.p_filesz, 1)) +
             " (copied in part?)";
    }
  }
  return "";
}

Loaded load(const std::string& name) {
  Loaded r;
  const std::string file = "libtandem-" + name + ".so";
  const std::vector<std::string> folders = search_folders();
  for (const std::string& folder : folders) {
    const std::string candidate = folder + "/" + file;
    struct stat entry {};
    if (::lstat(candidate.c_str(), &entry) == 0) {  // any entry, a dangling link too
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
  if (const std::string damage = damage_of(r.path); !damage.empty()) {
    r.error = r.path + ": " + damage + "; reinstall the module or remove it";
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
