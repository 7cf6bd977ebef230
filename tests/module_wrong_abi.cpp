// A backend module of another ABI (tests/CMakeLists.txt builds it as libtandem-<name>.so in a
// folder of its own): libtandem must refuse it by its number, before reading anything else of it.
#include "../core/module_abi.hpp"

extern "C" __attribute__((visibility("default"))) int tandem_module_abi() { return tandem::detail::kModuleAbi + 1; }
