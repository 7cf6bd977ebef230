// The cuda backend: the GPU Backend of backends/gpu over the CUDA runtime (compiled by nvcc).
// cuBLAS, tensor-core tiers and CUB variants join here (issue "CUDA and HIP backends complete").
#include "../../core/factories.hpp"
#include "../gpu/device_runtime.hpp"
#include "../gpu/gpu_backend.hpp"

namespace tandem::detail {

int cuda_device_count(std::string& reason) { return gpu::device_count(reason); }

std::shared_ptr<Backend> make_cuda_backend(int device) {
  return std::make_shared<gpu::GpuBackend<gpu::DeviceRuntime>>(device == 0 ? "cuda" : "cuda:" + std::to_string(device),
                                                               device);
}

}  // namespace tandem::detail
