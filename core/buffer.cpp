#include "tandem/buffer.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "host_memory.hpp"
#include "tandem/profile.hpp"

namespace tandem {

namespace detail {

// One device allocation; keeps its backend alive and returns the block to its cache.
struct Storage {
  std::shared_ptr<Backend> backend;
  void* ptr = nullptr;
  std::size_t managed_bytes = 0;     // the block's size, when managed
  bool managed = false;              // managed memory (Buffer::managed): freed to the runtime, never cached
  bool wrapped = false;              // memory of another owner (Buffer::wrap): never freed here
  std::shared_ptr<void> keep_alive;  // that owner, released with the storage
  ~Storage() {
    if (wrapped) return;
    if (managed) {
      backend->managed_free(ptr, managed_bytes);
    } else {
      backend->deallocate(ptr);
    }
  }
};

struct HostStorage {
  std::shared_ptr<Backend> backend;
  void* ptr = nullptr;
  std::size_t bytes = 0;
  bool pinned = false;
  ~HostStorage() { backend->host_free(ptr, bytes, pinned); }
};

}  // namespace detail

namespace {
std::shared_ptr<Backend> owner_of(Backend& backend) {
  try {
    return backend.shared_from_this();
  } catch (const std::bad_weak_ptr&) {
    throw InvalidArgument(
        "backend '" + backend.name() +
        "' is not owned by a std::shared_ptr; obtain backends from get_backend() or create_backend()");
  }
}

std::size_t checked_bytes(std::size_t count, DType dtype, Backend& backend) {
  if (count > std::numeric_limits<std::size_t>::max() / size_of(dtype)) {
    throw OutOfMemory(std::numeric_limits<std::size_t>::max(), backend.device_free_bytes(), backend.name());
  }
  return count * size_of(dtype);
}
}  // namespace

Buffer::Buffer(Backend& backend, DType dtype, std::size_t count, const std::source_location& where)
    : size_(count), dtype_(dtype) {
  const std::size_t bytes = checked_bytes(count, dtype, backend);
  storage_ = std::make_shared<detail::Storage>();
  storage_->backend = owner_of(backend);
  storage_->ptr = backend.allocate(bytes, where);
}

Buffer Buffer::managed(Backend& backend, DType dtype, std::size_t count, const std::source_location&) {
  const std::size_t bytes = checked_bytes(count, dtype, backend);
  auto storage = std::make_shared<detail::Storage>();
  storage->backend = owner_of(backend);
  storage->ptr = backend.managed_allocate(bytes);  // throws Unsupported without managed memory
  if (storage->ptr == nullptr)
    throw OutOfMemory(bytes, backend.device_free_bytes(), backend.name() + " (managed memory)");
  storage->managed = true;
  storage->managed_bytes = bytes;
  Buffer b;
  b.storage_ = std::move(storage);
  b.size_ = count;
  b.dtype_ = dtype;
  return b;
}

Buffer Buffer::wrap(Backend& backend, void* ptr, DType dtype, std::size_t count, std::shared_ptr<void> keep_alive) {
  const std::size_t bytes = checked_bytes(count, dtype, backend);
  if (ptr == nullptr && bytes != 0) {
    throw InvalidArgument("Buffer::wrap: null pointer for " + std::to_string(count) + " elements");
  }
  if (reinterpret_cast<std::uintptr_t>(ptr) % size_of(dtype) != 0) {
    throw InvalidArgument("Buffer::wrap: the pointer is not aligned to the " + std::to_string(size_of(dtype)) +
                          " bytes of a " + std::string(name_of(dtype)) + " element");
  }
  auto storage = std::make_shared<detail::Storage>();
  storage->backend = owner_of(backend);
  storage->ptr = ptr;
  storage->wrapped = true;
  storage->keep_alive = std::move(keep_alive);
  Buffer b;
  b.storage_ = std::move(storage);
  b.size_ = count;
  b.dtype_ = dtype;
  return b;
}

bool Buffer::is_wrapped() const { return storage_ != nullptr && storage_->wrapped; }

bool Buffer::is_managed() const { return storage_ != nullptr && storage_->managed; }

void* Buffer::managed_data() {
  if (!is_managed()) {
    throw InvalidArgument(
        "Buffer::host_span: the host can address only managed buffers (Buffer::managed); use download() or "
        "to_vector() for device memory");
  }
  return data();
}

Backend& Buffer::backend() const {
  if (!storage_) throw InvalidArgument("empty Buffer handle: construct it with a backend, dtype and size first");
  return *storage_->backend;
}

void* Buffer::data() {
  if (!storage_ || storage_->ptr == nullptr) return nullptr;
  return static_cast<char*>(storage_->ptr) + offset_ * size_of(dtype_);
}

const void* Buffer::data() const { return const_cast<Buffer*>(this)->data(); }

Buffer Buffer::slice(std::size_t offset, std::size_t count) const {
  if (offset > size_ || count > size_ - offset) {
    throw InvalidArgument("Buffer::slice: [" + std::to_string(offset) + ", " + std::to_string(offset + count) +
                          ") is outside the buffer of " + std::to_string(size_) + " elements");
  }
  Buffer view = *this;
  view.offset_ = offset_ + offset;
  view.size_ = count;
  return view;
}

Buffer Buffer::to(Backend& dst) const {
  Backend& src = backend();
  if (&dst == &src) return *this;
  Buffer out(dst, dtype_, size_);
  // Pieces of at most 64 MiB through one host buffer, so that a copy needs no host memory the size
  // of the buffer.
  const std::size_t esize = size_of(dtype_), piece = std::max<std::size_t>(1, (std::size_t{64} << 20) / esize);
  std::vector<unsigned char> staging;
  const std::size_t staging_bytes = std::min(size_, piece) * esize;
  try {
    staging.resize(staging_bytes);
  } catch (const std::bad_alloc&) {
    throw OutOfMemory(staging_bytes, host::available_memory_bytes(), "host (Buffer::to)");
  }
  for (std::size_t first = 0; first < size_; first += piece) {
    const std::size_t count = std::min(piece, size_ - first);
    slice(first, count).download_bytes(staging.data(), count * esize);
    out.slice(first, count).upload_bytes(staging.data(), count * esize);
  }
  return out;
}

void Buffer::check_host_type(DType host, std::size_t count, const char* what) const {
  if (host != dtype_) {
    throw DTypeMismatch(std::string("Buffer::") + what + ": host elements are " + std::string(name_of(host)) +
                        " but the buffer holds " + std::string(name_of(dtype_)));
  }
  if (count != size_) {
    throw ShapeMismatch(std::string("Buffer::") + what + ": host span has " + std::to_string(count) +
                        " elements, the buffer " + std::to_string(size_));
  }
}

void Buffer::upload_bytes(const void* h_src, std::size_t bytes, Queue q) {
  if (bytes != this->bytes()) {
    throw ShapeMismatch("Buffer::upload_bytes: " + std::to_string(bytes) + " bytes given, the buffer has " +
                        std::to_string(this->bytes()));
  }
  if (bytes == 0) return;
  if (h_src == nullptr) throw InvalidArgument("Buffer::upload_bytes: null host pointer");
  profile::OpTimer timer(backend(), q, "upload");
  if (timer.on()) timer.set(std::string(name_of(dtype_)) + "[" + std::to_string(size_) + "]", bytes);
  backend().copy_to_device(q, data(), h_src, bytes);
}

void Buffer::download_bytes(void* h_dst, std::size_t bytes, Queue q) const {
  if (bytes != this->bytes()) {
    throw ShapeMismatch("Buffer::download_bytes: " + std::to_string(bytes) + " bytes asked, the buffer has " +
                        std::to_string(this->bytes()));
  }
  if (bytes == 0) return;
  if (h_dst == nullptr) throw InvalidArgument("Buffer::download_bytes: null host pointer");
  profile::OpTimer timer(backend(), q, "download");
  if (timer.on()) timer.set(std::string(name_of(dtype_)) + "[" + std::to_string(size_) + "]", bytes);
  backend().copy_to_host(q, h_dst, data(), bytes);
  backend().synchronize(q);
}

HostBuffer::HostBuffer(Backend& backend, DType dtype, std::size_t count) : size_(count), dtype_(dtype) {
  const std::size_t bytes = checked_bytes(count, dtype, backend);
  storage_ = std::make_shared<detail::HostStorage>();
  storage_->backend = owner_of(backend);
  storage_->bytes = bytes;
  storage_->ptr = backend.host_allocate(bytes, storage_->pinned);
}

// Buffer::copy_from and Buffer::fill go through the public ops: they are defined with them, in
// algorithms/ops.cpp, so that core/ depends on nothing above it.

bool HostBuffer::is_pinned() const { return storage_->pinned; }
void* HostBuffer::data() { return storage_->ptr; }

}  // namespace tandem
