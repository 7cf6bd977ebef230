// The hip backend: the GPU Backend of backends/gpu over the HIP runtime (compiled by clang -x hip
// for AMD GPUs). The same sources as the cuda backend; only the runtime's names differ. Its
// vendor matmul would be rocBLAS, which Debian 12 does not package: asking for it says so.
#include "../../core/factories.hpp"
#include "../gpu/device_runtime.hpp"
#include "../gpu/gpu_backend.hpp"

namespace tandem::detail {

namespace {

class HipBackend final : public gpu::GpuBackend<gpu::DeviceRuntime> {
 public:
  HipBackend(std::string name, int device) : GpuBackend(std::move(name), device) {}

  void matmul(Queue q, const GemmArgs& a) override {
    if (a.tier == MatmulTier::vendor) {
      throw Unsupported("matmul: the vendor tier of '" + backend_name() +
                        "' would be rocBLAS, which Debian 12 (ROCm 5.2) does not package; use register_blocked");
    }
    GpuBackend::matmul(q, a);
  }
};

}  // namespace

int hip_device_count(std::string& reason) { return gpu::device_count(reason); }

std::shared_ptr<Backend> make_hip_backend(int device) {
  return std::make_shared<HipBackend>(device == 0 ? "hip" : "hip:" + std::to_string(device), device);
}

}  // namespace tandem::detail
