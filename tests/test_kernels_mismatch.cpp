// tests/user_kernels.cpp's block_scan, declared in this file with a signature it does not have (a
// file of its own: one file cannot declare the export with two types), for test_kernels.cpp's
// check that such an import is refused instead of called.
#include "tandem/kernels.hpp"

extern const tandem::detail::Export<void(tandem::Backend&, int)> tandem_export_block_scan_abi_sim
    TANDEM_KERNELS_REFERENCE_HOST;
extern const tandem::detail::Export<void(tandem::Backend&, int)> tandem_export_block_scan_abi_cuda
    TANDEM_KERNELS_REFERENCE_CUDA;
extern const tandem::detail::Export<void(tandem::Backend&, int)> tandem_export_block_scan_abi_hip
    TANDEM_KERNELS_REFERENCE_HIP;

namespace tandem::test {
const detail::Imported<void(Backend&, int)>& block_scan_with_another_signature() {
  static const detail::Imported<void(Backend&, int)> wrong{"block_scan", &tandem_export_block_scan_abi_sim,
                                                           &tandem_export_block_scan_abi_cuda,
                                                           &tandem_export_block_scan_abi_hip};
  return wrong;
}
}  // namespace tandem::test
