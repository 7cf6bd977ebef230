// The hip backend: the GPU Backend of backends/gpu over the HIP runtime (compiled by clang -x hip
// for AMD GPUs). The same sources as the cuda backend; only the runtime's names differ.
#include "../../core/factories.hpp"
#include "../gpu/device_runtime.hpp"
#include "../gpu/gpu_backend.hpp"

namespace tandem::detail {

int hip_device_count(std::string& reason) { return gpu::device_count(reason); }

std::shared_ptr<Backend> make_hip_backend(int device) {
  return std::make_shared<gpu::GpuBackend<gpu::DeviceRuntime>>(device == 0 ? "hip" : "hip:" + std::to_string(device),
                                                               device);
}

}  // namespace tandem::detail
