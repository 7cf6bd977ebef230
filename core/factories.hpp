// How the registry reaches each backend compiled in. Internal; each backend folder defines its pair.
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

// Devices of that backend usable here; 0 with `reason` set when none.
int reference_device_count(std::string& reason);
std::shared_ptr<Backend> make_reference_backend(int device);

#ifdef TANDEM_HAVE_OPENMP
int openmp_device_count(std::string& reason);
std::shared_ptr<Backend> make_openmp_backend(int device);
#endif

#ifdef TANDEM_HAVE_SIM
int sim_device_count(std::string& reason);
std::shared_ptr<Backend> make_sim_backend(int device);
std::shared_ptr<Backend> make_sim64_backend(int device);
#endif

#ifdef TANDEM_HAVE_CUDA
int cuda_device_count(std::string& reason);
std::shared_ptr<Backend> make_cuda_backend(int device);
#endif

#ifdef TANDEM_HAVE_KOKKOS
int kokkos_device_count(std::string& reason);
std::shared_ptr<Backend> make_kokkos_backend(int device);
#endif

#ifdef TANDEM_HAVE_HIP
int hip_device_count(std::string& reason);
std::shared_ptr<Backend> make_hip_backend(int device);
#endif

}  // namespace tandem::detail
