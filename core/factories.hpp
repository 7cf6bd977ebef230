// How backends are created. Internal.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "tandem/backend.hpp"

namespace tandem::detail {

// Every backend is created as an Owned<B>: its destructor, the most derived, gives the caching
// allocator's blocks back while B's device state (runtime, context, streams) is still alive; a
// base-class destructor would run too late to call B::device_free. So no backend writes a
// destructor for its memory.
template <class B>
class Owned final : public B {
 public:
  using B::B;
  ~Owned() override { this->shutdown_memory(); }
};
template <class B, class... Args>
std::shared_ptr<Owned<B>> make_backend(Args&&... args) {
  return std::make_shared<Owned<B>>(std::forward<Args>(args)...);
}

// Each backend folder also defines, for each backend name in cmake/TandemBackends.cmake:
//   int <name>_device_count(std::string& reason);     // devices usable here; 0 with reason when none
//   std::shared_ptr<Backend> make_<name>_backend(int device);
// declared where they are used, from the generated list (core/registry.cpp).

}  // namespace tandem::detail
