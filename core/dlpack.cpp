// DLPack exchange (include/tandem/dlpack.hpp): exports keep a Buffer handle in the tensor's
// manager context; imports wrap the producer's memory with the tensor as the keep-alive owner.
#include "tandem/dlpack.hpp"

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "tandem/detail/checked.hpp"
#include "tandem/errors.hpp"
#include "tandem/registry.hpp"

namespace tandem {

namespace {

struct Export {
  Buffer buffer;  // keeps the memory alive
  std::vector<std::int64_t> shape, strides;
  DLManagedTensor tensor{};
};

void delete_export(DLManagedTensor* self) { delete static_cast<Export*>(self->manager_ctx); }

// An imported tensor's owner inside tandem: calls the producer's deleter when the last buffer
// handle goes, once `tensor` is set (after everything that can throw).
struct Adopted {
  DLManagedTensor* tensor = nullptr;
  ~Adopted() {
    if (tensor != nullptr && tensor->deleter != nullptr) tensor->deleter(tensor);
  }
};

// The device type's number as the producer stored it: a C producer may store any int in the enum
// field, and loading a value outside the enum's range as DLDeviceType is undefined behaviour in
// C++ (UBSan flags it), so the field's bytes are read as an integer.
int device_code(const DLDevice& device) {
  static_assert(sizeof(device.device_type) == sizeof(std::int32_t), "DLPack's device type is a 32-bit enum");
  std::int32_t code = 0;
  std::memcpy(&code, &device.device_type, sizeof code);
  return code;
}

std::string name_of(DLDevice device) {
  const std::string id = std::to_string(device.device_id);
  switch (device_code(device)) {
    case kDLCPU:
      return "host memory";
    case kDLCUDA:
      return "CUDA device " + id + " memory";
    case kDLCUDAHost:
      return "CUDA pinned host memory";
    case kDLCUDAManaged:
      return "CUDA managed memory";
    case kDLROCM:
      return "ROCm device " + id + " memory";
    case kDLROCMHost:
      return "ROCm pinned host memory";
    default:
      return "DLPack device type " + std::to_string(device_code(device)) + " memory";
  }
}

// Memory the host reads without waiting for a GPU queue: only plain host memory. (Pinned and
// managed memory of a GPU runtime are host-addressable too, but a producer's queued kernels may
// still be writing them.)
bool is_host_memory(const DLDevice& device) { return device_code(device) == kDLCPU; }

}  // namespace

DLDevice dlpack_device(const Buffer& buffer) {
  const MemoryPlace place = buffer.backend().memory_place();
  switch (place.kind) {
    case MemoryPlace::Kind::host:
      return {kDLCPU, 0};
    case MemoryPlace::Kind::cuda:
      return {buffer.is_managed() ? kDLCUDAManaged : kDLCUDA, place.device};
    case MemoryPlace::Kind::rocm:
      return {kDLROCM, place.device};
    case MemoryPlace::Kind::other:
      break;
  }
  throw Unsupported("DLPack: backend '" + buffer.backend().name() + "' keeps its buffers in " + describe(place) +
                    ", which DLPack cannot name; copy the data to the host first");
}

DLDataType dlpack_dtype(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return {kDLFloat, 16, 1};
    case DType::bf16:
      return {kDLBfloat, 16, 1};
    case DType::f32:
      return {kDLFloat, 32, 1};
    case DType::f64:
      return {kDLFloat, 64, 1};
    case DType::i32:
      return {kDLInt, 32, 1};
  }
  throw InvalidArgument("DLPack: unknown dtype");
}

DType dtype_from_dlpack(DLDataType t) {
  if (t.lanes == 1) {
    if (t.code == kDLFloat && t.bits == 16) return DType::f16;
    if (t.code == kDLBfloat && t.bits == 16) return DType::bf16;
    if (t.code == kDLFloat && t.bits == 32) return DType::f32;
    if (t.code == kDLFloat && t.bits == 64) return DType::f64;
    if (t.code == kDLInt && t.bits == 32) return DType::i32;
  }
  static constexpr const char* kCodes[] = {"int", "uint", "float", "opaque handle", "bfloat", "complex", "bool"};
  const std::string code = t.code < std::size(kCodes) ? kCodes[t.code] : "type code " + std::to_string(t.code);
  throw DTypeMismatch("DLPack: tensors of " + code + std::to_string(t.bits) +
                      (t.lanes == 1 ? std::string() : " x " + std::to_string(t.lanes) + " lanes") +
                      " have no tandem dtype; tandem takes float16, bfloat16, float32, float64 and int32");
}

DLManagedTensor* to_dlpack(const Buffer& buffer) {
  return to_dlpack(Tensor{buffer, {static_cast<std::int64_t>(buffer.size())}});
}

DLManagedTensor* to_dlpack(const Tensor& tensor) {
  const Buffer& buffer = tensor.buffer;
  const DLDevice device = dlpack_device(buffer);  // checks the handle and the memory's kind
  for (std::int64_t d : tensor.shape) {
    if (d < 0) throw InvalidArgument("to_dlpack: negative dimension " + std::to_string(d));
  }
  std::int64_t product = 0;
  if (!detail::element_count(tensor.shape, product)) {
    throw ShapeMismatch("to_dlpack: the shape's element count does not fit in 64 bits; the buffer holds " +
                        std::to_string(buffer.size()));
  }
  tensor.check("to_dlpack");  // strides of the shape's rank, none negative, every element inside the buffer
  const bool strided = !tensor.is_contiguous();
  if (!strided && static_cast<std::uint64_t>(product) != buffer.size()) {
    throw ShapeMismatch("to_dlpack: the shape holds " + std::to_string(product) + " elements, the buffer " +
                        std::to_string(buffer.size()));
  }
  auto ex = std::make_unique<Export>();
  ex->buffer = buffer;
  ex->shape = tensor.shape;
  if (strided) ex->strides = tensor.strides;
  DLTensor& t = ex->tensor.dl_tensor;
  t.data = const_cast<void*>(ex->buffer.data());
  t.device = device;
  t.ndim = static_cast<int>(ex->shape.size());
  t.dtype = dlpack_dtype(buffer.dtype());
  t.shape = ex->shape.data();
  t.strides = strided ? ex->strides.data() : nullptr;  // null: compact row-major
  t.byte_offset = 0;
  ex->tensor.manager_ctx = ex.get();
  ex->tensor.deleter = delete_export;
  return &ex.release()->tensor;
}

bool addresses(const Backend& backend, DLDevice device) {
  const MemoryPlace place = backend.memory_place();
  switch (place.kind) {
    case MemoryPlace::Kind::host:
      return is_host_memory(device);
    case MemoryPlace::Kind::cuda:
      return device_code(device) == kDLCUDAManaged || (device_code(device) == kDLCUDA && device.device_id == place.device);
    case MemoryPlace::Kind::rocm:
      return device_code(device) == kDLROCM && device.device_id == place.device;
    case MemoryPlace::Kind::other:
      break;
  }
  return false;
}

Tensor from_dlpack(Backend& backend, DLManagedTensor* managed) {
  if (managed == nullptr) throw InvalidArgument("from_dlpack: null DLManagedTensor");
  const DLTensor& t = managed->dl_tensor;
  if (!addresses(backend, t.device)) {
    throw InvalidArgument("from_dlpack: the tensor is in " + name_of(t.device) + ", which backend '" + backend.name() +
                          "' (" + describe(backend.memory_place()) +
                          ") cannot address; import it on a backend of that device, or copy it there first");
  }
  const DType dtype = dtype_from_dlpack(t.dtype);
  if (t.ndim < 0) throw InvalidArgument("from_dlpack: negative ndim " + std::to_string(t.ndim));
  if (t.ndim > 0 && t.shape == nullptr) throw InvalidArgument("from_dlpack: null shape for " + std::to_string(t.ndim) + " dimensions");
  Tensor out;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0) throw InvalidArgument("from_dlpack: negative dimension " + std::to_string(t.shape[i]));
    out.shape.push_back(t.shape[i]);
  }
  std::int64_t count = 0;
  if (!detail::element_count(out.shape, count)) {
    std::string dims;
    for (std::int64_t d : out.shape) dims += (dims.empty() ? "" : " x ") + std::to_string(d);
    throw InvalidArgument("from_dlpack: the shape " + dims + " holds more elements than 64 bits count");
  }
  if (t.strides != nullptr && count > 0) {  // must be those of the compact row-major layout
    std::int64_t expected = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (t.shape[i] != 1 && t.strides[i] != expected) {
        throw InvalidArgument("from_dlpack: the tensor is not compact row-major (dimension " + std::to_string(i) +
                              " has stride " + std::to_string(t.strides[i]) + ", not " + std::to_string(expected) +
                              "); make it contiguous first (numpy.ascontiguousarray, torch.Tensor.contiguous)");
      }
      expected *= t.shape[i];
    }
  }
  // In integers: an offset or an extent past the end of the address space is refused, not wrapped
  // (pointer arithmetic that overflows is undefined; the fuzzer found an offset of 2^64 - 2^48).
  const std::uintptr_t base = reinterpret_cast<std::uintptr_t>(t.data);
  if (t.byte_offset > UINTPTR_MAX - base ||
      static_cast<std::uint64_t>(count) > (UINTPTR_MAX - base - t.byte_offset) / size_of(dtype)) {
    throw InvalidArgument("from_dlpack: byte_offset " + std::to_string(t.byte_offset) + " and " +
                          std::to_string(count) + " elements reach past the end of the address space");
  }
  void* data = reinterpret_cast<void*>(base + t.byte_offset);
  // Everything that can refuse the tensor comes before it is adopted: a throw leaves it with the caller.
  if (count > 0 && t.data == nullptr) throw InvalidArgument("from_dlpack: null data for a non-empty tensor");
  if (count > 0 && reinterpret_cast<std::uintptr_t>(data) % size_of(dtype) != 0) {
    throw InvalidArgument("from_dlpack: the tensor's data is not aligned to its " + std::to_string(size_of(dtype)) +
                          "-byte elements");
  }
  if (static_cast<std::uint64_t>(count) > std::numeric_limits<std::size_t>::max() / size_of(dtype)) {
    throw InvalidArgument("from_dlpack: the tensor's " + std::to_string(count) +
                          " elements overflow the address space");
  }
  auto owner = std::make_shared<Adopted>();  // adopts nothing yet
  out.buffer = Buffer::wrap(backend, count > 0 ? data : nullptr, dtype, static_cast<std::size_t>(count), owner);
  owner->tensor = managed;  // cannot throw: from here on tandem owns it
  return out;
}

Backend& backend_for_device(DLDevice device) {
  switch (device_code(device)) {
    case kDLCUDA:
      return get_backend("cuda:" + std::to_string(device.device_id));
    case kDLROCM:
      return get_backend("hip:" + std::to_string(device.device_id));
    default:
      break;
  }
  if (!is_host_memory(device)) {
    throw BackendUnavailable("no tandem backend addresses " + name_of(device));
  }
  Backend& preferred = default_backend();
  if (addresses(preferred, device)) return preferred;
  for (const auto& info : backends()) {
    if (info.available && info.name == "openmp") return get_backend("openmp");
  }
  return get_backend("reference");
}

}  // namespace tandem
