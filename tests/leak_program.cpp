// Leaks one buffer on purpose: run with TANDEM_DEBUG_MEMORY=1, the report at exit must name it.
#include "tandem/tandem.hpp"

int main() {
  auto* leaked = new tandem::Buffer(tandem::get_backend("reference"), tandem::DType::f32, 1000);
  (void)leaked;  // never deleted
  return 0;
}
