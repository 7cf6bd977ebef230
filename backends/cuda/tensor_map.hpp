// Tensor maps for TMA copies on the cuda backend: cuTensorMapEncodeTiled, reached through the CUDA
// runtime's driver entry point (tandem links the runtime statically and not libcuda), taking the
// arguments of the simulator's sim::make_tensor_map_2d (backends/sim/sim_hopper.hpp), so a
// Hopper kernel's host code is written once.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "tandem/errors.hpp"
#include "tandem/gpu/types.hpp"

namespace tandem::cuda {

// A 2D tensor of elem_bytes elements (1, 2, 4 or 8), `width` along its contiguous dimension and
// `height` rows `row_bytes` apart, copied in boxes of box_width x box_height elements; zeros
// past its edges. InvalidArgument where the driver refuses the map (its rules:
// sim::make_tensor_map_2d's comment), Unsupported where the driver has no TMA.
inline CUtensorMap make_tensor_map_2d(const void* base, std::size_t elem_bytes, std::uint64_t width,
                                      std::uint64_t height, std::uint64_t row_bytes, std::uint32_t box_width,
                                      std::uint32_t box_height, gpu::Swizzle swizzle) {
  static const auto encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    const cudaError_t e =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found);
#else
    const cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &found);
#endif
    if (e != cudaSuccess || found != cudaDriverEntryPointSuccess) fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (encode == nullptr) {
    throw Unsupported("cuda: the driver has no cuTensorMapEncodeTiled (TMA copies need a CUDA 12 driver)");
  }
  CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  switch (elem_bytes) {
    case 1:
      type = CU_TENSOR_MAP_DATA_TYPE_UINT8;
      break;
    case 2:
      type = CU_TENSOR_MAP_DATA_TYPE_UINT16;
      break;
    case 4:
      type = CU_TENSOR_MAP_DATA_TYPE_UINT32;
      break;
    case 8:
      type = CU_TENSOR_MAP_DATA_TYPE_UINT64;
      break;
    default:
      throw InvalidArgument("tensor map: elements of " + std::to_string(elem_bytes) + " bytes (1, 2, 4 or 8)");
  }
  const CUtensorMapSwizzle how = swizzle == gpu::Swizzle::bytes128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                 : swizzle == gpu::Swizzle::bytes64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                 : swizzle == gpu::Swizzle::bytes32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                                    : CU_TENSOR_MAP_SWIZZLE_NONE;
  const cuuint64_t dims[2] = {width, height};
  const cuuint64_t strides[1] = {row_bytes};  // of the dimensions past the first, in bytes
  const cuuint32_t box[2] = {box_width, box_height};
  const cuuint32_t steps[2] = {1, 1};  // every element of the box
  CUtensorMap map;
  const CUresult r =
      encode(&map, type, 2, const_cast<void*>(base), dims, strides, box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE, how,
             CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw InvalidArgument("tensor map: cuTensorMapEncodeTiled refused it (CUresult " + std::to_string(int(r)) +
                          "): " + std::to_string(width) + " x " + std::to_string(height) + " elements of " +
                          std::to_string(elem_bytes) + " bytes, rows " + std::to_string(row_bytes) +
                          " bytes apart, boxes of " + std::to_string(box_width) + " x " + std::to_string(box_height));
  }
  return map;
}

}  // namespace tandem::cuda
