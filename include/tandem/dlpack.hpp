// DLPack exchange: a tandem buffer handed to another library (NumPy, PyTorch, CuPy, JAX) as a
// DLManagedTensor, and theirs taken in as a tandem buffer, both without copying. Needs
// <dlpack/dlpack.h> (Debian: libdlpack-dev; a libtandem built with TANDEM_ENABLE_DLPACK).
//
// Lifetime follows the DLPack contract: the side that receives a DLManagedTensor calls its
// deleter once, when done. An export keeps the buffer's memory alive until then; an import keeps
// the producer's tensor until the last Buffer handle sharing it goes.
//
// The unversioned DLManagedTensor only: Debian 12's DLPack (0.6) has no DLManagedTensorVersioned.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <span>
#include <vector>

#include "tandem/buffer.hpp"
#include "tandem/tensor.hpp"

namespace tandem {

// The DLPack device of a buffer's memory: kDLCPU for host memory (the CPU backends and the
// simulator), kDLCUDA / kDLROCM with the device ordinal, kDLCUDAManaged for a managed buffer on
// cuda. Unsupported for memory of no DLPack kind (Kokkos device spaces).
DLDevice dlpack_device(const Buffer& buffer);
DLDataType dlpack_dtype(DType dtype);
// float16, bfloat16, float32, float64 and int32 with one lane; DTypeMismatch naming any other.
DType dtype_from_dlpack(DLDataType dtype);

// A new DLManagedTensor over the buffer's memory: one dimension of buffer.size(), or the
// tensor's shape (an empty shape is a 0-d scalar): a compact tensor's product must be
// buffer.size() (ShapeMismatch); a strided view goes with its strides (Tensor::check()). The
// memory stays alive until the receiver calls the tensor's deleter.
DLManagedTensor* to_dlpack(const Buffer& buffer);
DLManagedTensor* to_dlpack(const Tensor& tensor);

// The tensor's memory as a buffer of `backend`, which must address it (InvalidArgument names the
// backend to use otherwise): kDLCPU memory for the CPU backends and the simulator, its own device
// (or CUDA managed memory) for cuda and hip. Pinned and managed memory of a GPU runtime are
// refused on the host backends: the producer's queued work on them would race the host's reads. The
// tensor must be compact row-major (null strides, or the strides of that layout) and of a type
// dtype_from_dlpack takes. On success tandem owns the tensor and calls its deleter when the last
// handle sharing it goes; when this throws, the caller still owns it (tandem adopts the tensor
// only after everything that can throw).
Tensor from_dlpack(Backend& backend, DLManagedTensor* tensor);

// Whether `backend` addresses memory of this device (from_dlpack would take it).
bool addresses(const Backend& backend, DLDevice device);
// The backend tandem picks for a device's memory: cuda:N or hip:N for a GPU's, and for host
// memory the default backend when it addresses host memory, else openmp (reference without it).
// BackendUnavailable when no backend built here addresses it.
Backend& backend_for_device(DLDevice device);

}  // namespace tandem
