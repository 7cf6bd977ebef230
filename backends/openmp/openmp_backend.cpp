#include "openmp_backend.hpp"

#include <algorithm>
#include <new>

#include <omp.h>

#include "../../core/factories.hpp"
#include "../host/cpu_info.hpp"
#include "microkernel.hpp"

namespace tandem::openmp {

OpenMPBackend::OpenMPBackend() : threads_(omp_get_max_threads()) {}

DeviceProperties OpenMPBackend::properties() const {
  DeviceProperties p = host::cpu_properties(threads_);
  p.isa_features.push_back(std::string("microkernel:") + best_microkernel_f32().isa);
  return p;
}

std::vector<MatmulTier> OpenMPBackend::matmul_tiers(DType ab) const {
  std::vector<MatmulTier> tiers = {MatmulTier::naive, MatmulTier::tiled, MatmulTier::register_blocked};
  if (vendor_available() && (ab == DType::f32 || ab == DType::f64)) tiers.push_back(MatmulTier::vendor);
  return tiers;
}

MatmulTier OpenMPBackend::choose_matmul_tier(const GemmArgs& g) const {
  // Packing pays off once the product has some depth; tiny products go straight through.
  if (g.m * g.n * g.k < 4096) return MatmulTier::naive;
  return MatmulTier::register_blocked;
}

void OpenMPBackend::matmul(Queue q, const GemmArgs& g) {
  check_queue(q);
  try {
    switch (g.tier) {
      case MatmulTier::naive: matmul_naive(g); break;
      case MatmulTier::tiled: matmul_tiled(g); break;
      case MatmulTier::register_blocked: matmul_register_blocked(g); break;
      case MatmulTier::vendor: matmul_vendor(g); break;
      default: throw Unsupported("openmp: matmul tier '" + std::string(name_of(g.tier)) + "' is not offered");
    }
  } catch (const std::bad_alloc&) {  // packing buffers: report it as the typed error
    throw OutOfMemory(static_cast<std::size_t>((g.m + g.n) * std::min<std::int64_t>(g.k, 512)) * size_of(g.c_type),
                      device_free_bytes(), name() + " (matmul packing buffers)");
  }
}

}  // namespace tandem::openmp

namespace tandem::detail {
int openmp_device_count(std::string&) { return 1; }
std::shared_ptr<Backend> make_openmp_backend(int) { return std::make_shared<openmp::OpenMPBackend>(); }
}  // namespace tandem::detail
