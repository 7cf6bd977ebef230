// A program that initialises and finalises Kokkos itself and uses tandem's kokkos backend in
// between: tandem must use the program's Kokkos, give its memory back when the program finalises
// (a buffer still alive then included), refuse new memory afterwards, and exit cleanly.
#include <Kokkos_Core.hpp>
#include <cstdio>
#include <vector>

#include "tandem/tandem.hpp"

int main(int argc, char** argv) {
  Kokkos::initialize(argc, argv);
  tandem::Buffer kept;  // alive past Kokkos::finalize: its memory must not be freed twice
  int failures = 0;
  {
    tandem::Backend& be = tandem::get_backend("kokkos");
    tandem::Buffer x = tandem::Buffer::from(be, std::vector<float>(1000, 0.5f));
    if (tandem::sum(x) != 500) ++failures;
    kept = tandem::Buffer(be, tandem::DType::f32, 16);
    kept.fill(2);
    if (kept.to_vector<float>()[15] != 2) ++failures;
  }
  Kokkos::finalize();
  try {
    tandem::Buffer late(tandem::get_backend("kokkos"), tandem::DType::f32, 16);
    std::printf("an allocation after Kokkos::finalize succeeded\n");
    ++failures;
  } catch (const tandem::BackendUnavailable& e) {
    std::printf("after finalize: %s\n", e.what());
  }
  std::printf("%s\n", failures == 0 ? "kokkos user program: all good" : "kokkos user program: FAILED");
  return failures == 0 ? 0 : 1;
}
