// Buffer: typed device memory owned by one backend. A cheap handle: copies share the memory,
// which is freed (back into the backend's cache) when the last handle goes.
#pragma once

#include <cstddef>
#include <memory>
#include <source_location>
#include <span>
#include <vector>

#include "tandem/backend.hpp"
#include "tandem/dtype.hpp"
#include "tandem/errors.hpp"

namespace tandem {

namespace detail {
struct Storage;
struct HostStorage;
}  // namespace detail

class Buffer {
 public:
  Buffer() = default;  // an empty handle; ops reject it
  // count elements of dtype on backend; contents undefined. Throws OutOfMemory.
  Buffer(Backend& backend, DType dtype, std::size_t count,
         const std::source_location& where = std::source_location::current());

  // Allocates and uploads host data.
  template <class T>
  static Buffer from(Backend& backend, std::span<const T> host,
                     const std::source_location& where = std::source_location::current()) {
    Buffer b(backend, dtype_of_v<T>, host.size(), where);
    b.upload(host);
    return b;
  }
  template <class T>
  static Buffer from(Backend& backend, const std::vector<T>& host,
                     const std::source_location& where = std::source_location::current()) {
    return from(backend, std::span<const T>(host), where);
  }

  // count elements of managed (unified) memory, which the host reads and writes through
  // host_span() (Backend::has_managed_memory: CUDA, HIP, the simulator). Not cached: freed when
  // the last handle goes, and not counted in memory_stats(). Throws Unsupported on a backend
  // without managed memory, OutOfMemory when the runtime cannot give it.
  static Buffer managed(Backend& backend, DType dtype, std::size_t count,
                        const std::source_location& where = std::source_location::current());
  bool is_managed() const;

  // A buffer over memory tandem did not allocate: count elements of dtype at ptr, which must be
  // memory the backend's ops address (Backend::memory_place: host memory for the CPU backends and
  // the simulator, device memory of its device for cuda and hip) and stay valid while any handle
  // lives. tandem never frees it: keep_alive (the memory's owner, or null) is held until the last
  // handle sharing the memory goes, and then released. ptr must be aligned to the element size
  // and not null unless count is 0 (InvalidArgument). Not counted in memory_stats(); the
  // simulator puts no guard zones around it.
  static Buffer wrap(Backend& backend, void* ptr, DType dtype, std::size_t count,
                     std::shared_ptr<void> keep_alive = nullptr);
  bool is_wrapped() const;
  // The elements as host memory: managed buffers only (InvalidArgument otherwise). The host sees
  // what queued work wrote only after that queue is synchronized, and must not touch the memory
  // while work that uses it is queued.
  template <class T>
  std::span<T> host_span() {
    check_host_type(dtype_of_v<T>, size_, "host_span");
    return {static_cast<T*>(managed_data()), size_};
  }

  bool empty_handle() const { return storage_ == nullptr; }
  Backend& backend() const;  // throws InvalidArgument on an empty handle
  DType dtype() const { return dtype_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * size_of(dtype_); }
  void* data();
  const void* data() const;

  // A view of elements [offset, offset + count) sharing this buffer's memory.
  Buffer slice(std::size_t offset, std::size_t count) const;

  // Host -> device, whole buffer; the span's element type must match dtype().
  template <class T>
  void upload(std::span<const T> host, Queue q = {}) {
    check_host_type(dtype_of_v<T>, host.size(), "upload");
    upload_bytes(host.data(), host.size_bytes(), q);
  }
  template <class T>
  void upload(const std::vector<T>& host, Queue q = {}) {
    upload(std::span<const T>(host), q);
  }
  // Device -> host, whole buffer; returns when the data is on the host.
  template <class T>
  void download(std::span<T> host, Queue q = {}) const {
    check_host_type(dtype_of_v<T>, host.size(), "download");
    download_bytes(host.data(), host.size_bytes(), q);
  }
  template <class T>
  std::vector<T> to_vector(Queue q = {}) const {
    std::vector<T> host(size_);
    download(std::span<T>(host), q);
    return host;
  }
  // Untyped transfers of exactly bytes() bytes.
  void upload_bytes(const void* h_src, std::size_t bytes, Queue q = {});
  void download_bytes(void* h_dst, std::size_t bytes, Queue q = {}) const;
  // Device -> device from a buffer of the same backend, dtype and size.
  void copy_from(const Buffer& src, Queue q = {});
  // Every element = value (converted to dtype()).
  void fill(double value, Queue q = {});
  // This buffer on backend dst: itself (a handle sharing its memory) when dst is its backend, else
  // a new buffer there holding a copy, made through host memory in bounded pieces.
  Buffer to(Backend& dst) const;

 private:
  void check_host_type(DType host, std::size_t count, const char* what) const;
  void* managed_data();  // data(), after checking the buffer is managed

  std::shared_ptr<detail::Storage> storage_;
  std::size_t offset_ = 0;  // elements
  std::size_t size_ = 0;    // elements
  DType dtype_ = DType::f32;
};

// Host memory for transfers: page-locked where the backend has it (GPU runtimes), plain aligned
// host memory otherwise (is_pinned() says which).
class HostBuffer {
 public:
  HostBuffer(Backend& backend, DType dtype, std::size_t count);
  DType dtype() const { return dtype_; }
  std::size_t size() const { return size_; }
  bool is_pinned() const;
  void* data();
  template <class T>
  std::span<T> span() {
    if (dtype_of_v<T> != dtype_)
      throw DTypeMismatch("HostBuffer::span: element type does not match the buffer's dtype");
    return {static_cast<T*>(data()), size_};
  }

 private:
  std::shared_ptr<detail::HostStorage> storage_;
  std::size_t size_ = 0;
  DType dtype_ = DType::f32;
};

}  // namespace tandem
