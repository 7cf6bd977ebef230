// The interface of a backend module (libtandem-<name>.so): what a shared libtandem loads at run
// time for the backends that need a vendor runtime (cuda, hip, kokkos), so that libtandem itself
// loads on machines without those runtimes. Internal: modules are built with this tandem.
//
// A module exports two C-linkage functions and nothing else that libtandem looks up:
//   int tandem_module_abi(void);                     kModuleAbi when the module was built
//   const ModuleTable* tandem_module_table(void);    read only after the ABI matched
// The table's factory returns C++ objects (the Backend contract of backend.hpp), so module and
// library must agree on that contract: kModuleAbi changes whenever backend.hpp's Backend class,
// the types it passes or ModuleTable change, and `contract` (a hash of those headers taken at
// configure time) catches a module built from other headers with the same number.
#pragma once

#include <memory>
#include <string>

#include "tandem/backend.hpp"

namespace tandem::detail {

inline constexpr int kModuleAbi = 1;

struct ModuleTable {
  const char* name;      // the backend's name: "cuda", "hip", "kokkos"
  const char* contract;  // TANDEM_MODULE_CONTRACT of the headers it was built with
  int (*device_count)(std::string& why);
  std::shared_ptr<Backend> (*make)(int device);
};

}  // namespace tandem::detail

// Defines a module's two entry points for backend `n` (its folder defines n_device_count and
// make_n_backend, as for a backend linked into libtandem).
#define TANDEM_BACKEND_MODULE(n)                                                                                   \
  namespace tandem::detail {                                                                                       \
  int n##_device_count(std::string& why);                                                                          \
  std::shared_ptr<Backend> make_##n##_backend(int device);                                                         \
  }                                                                                                                \
  extern "C" __attribute__((visibility("default"))) int tandem_module_abi() { return tandem::detail::kModuleAbi; } \
  extern "C" __attribute__((visibility("default"))) const tandem::detail::ModuleTable* tandem_module_table() {     \
    static const tandem::detail::ModuleTable table{#n, TANDEM_MODULE_CONTRACT, &tandem::detail::n##_device_count,  \
                                                   &tandem::detail::make_##n##_backend};                           \
    return &table;                                                                                                 \
  }
