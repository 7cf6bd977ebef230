// What the CPU backends (reference, openmp) share: host memory as device memory, memcpy copies,
// synchronous queues, and dtype dispatch.
#pragma once

#include <cstring>
#include <string>

#include "tandem/backend.hpp"
#include "../../core/dispatch.hpp"
#include "../../core/host_memory.hpp"
#include "tandem/errors.hpp"

namespace tandem::host {

using detail::dispatch_any;
using detail::dispatch_float;
using detail::dispatch_numeric;
using detail::dispatch_real;

// Converts an element of any storage type to the compute type C.
template <class C, class T> inline C to(T v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return static_cast<C>(static_cast<float>(v));
  } else {
    return static_cast<C>(v);
  }
}
// And back: the compute type to a storage type.
template <class T, class C> inline T from(C v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return T(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    return static_cast<std::int32_t>(v);
  } else {
    return static_cast<T>(v);
  }
}

class HostBackend : public Backend {
 public:
  void* device_allocate(std::size_t bytes) override;
  void device_free(void* ptr, std::size_t bytes) override;
  std::size_t device_free_bytes() const override;
  void copy_to_device(Queue q, void* d_dst, const void* h_src, std::size_t bytes) override;
  void copy_to_host(Queue q, void* h_dst, const void* d_src, std::size_t bytes) override;
  void copy_on_device(Queue q, void* d_dst, const void* d_src, std::size_t bytes) override;
  void synchronize(Queue q) override;

 protected:
  // Queues on the host are synchronous: only the default queue (id 0) and those from create_queue.
  void check_queue(Queue q) const;
};

}  // namespace tandem::host
