// Backend modules of a shared libtandem (module_abi.hpp): found, loaded once and checked on first
// use by name. Internal: the registry's entries for module backends call these.
#pragma once

#include <memory>
#include <string>

#include "tandem/backend.hpp"

namespace tandem::detail {

// Devices of the module's backend; 0 with `why` (the loader's reason, naming the file) when the
// module is missing, does not load, or is of another ABI.
int module_device_count(const char* name, std::string& why);
// A new instance; BackendUnavailable with the loader's reason when the module cannot be used.
std::shared_ptr<Backend> module_make(const char* name, int device);
// The module file used for `name`, or "" when none was found.
std::string module_path(const char* name);

}  // namespace tandem::detail
