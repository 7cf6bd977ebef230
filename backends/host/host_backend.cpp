#include "host_backend.hpp"

#include <new>

namespace tandem::host {

void* HostBackend::device_allocate(std::size_t bytes) {
  // Linux overcommits: refuse outright what could never be backed rather than be killed later.
  const std::size_t total = physical_memory_bytes();
  if (total != 0 && bytes > total) return nullptr;
  return ::operator new(bytes, std::align_val_t(64), std::nothrow);
}

void HostBackend::device_free(void* ptr, std::size_t) { ::operator delete(ptr, std::align_val_t(64)); }

std::size_t HostBackend::device_free_bytes() const { return available_memory_bytes(); }

void HostBackend::check_queue(Queue q) const {
  if (q.id != 0) {
    throw InvalidArgument("backend '" + name() + "' has only its default queue (Queue{}); got queue " +
                          std::to_string(q.id));
  }
}

void HostBackend::copy_to_device(Queue q, void* d_dst, const void* h_src, std::size_t bytes) {
  check_queue(q);
  std::memcpy(d_dst, h_src, bytes);
}

void HostBackend::copy_to_host(Queue q, void* h_dst, const void* d_src, std::size_t bytes) {
  check_queue(q);
  std::memcpy(h_dst, d_src, bytes);
}

void HostBackend::copy_on_device(Queue q, void* d_dst, const void* d_src, std::size_t bytes) {
  check_queue(q);
  std::memmove(d_dst, d_src, bytes);
}

void HostBackend::synchronize(Queue q) { check_queue(q); }

}  // namespace tandem::host
