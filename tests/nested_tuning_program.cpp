// The openmp tuning first needed inside the caller's own parallel region, where a calibration's
// loops would run on one thread each: the table's (said so), and nothing cached. Run alone, in a
// fresh process, with TANDEM_OPENMP_STREAM_FROM=0 (so that a small add takes the tuned stores);
// argv[1] is the cache directory, emptied first.
#include <omp.h>

#include <cstdio>
#include <vector>

#include "tandem/tandem.hpp"
#include "tuning_cache_dir.hpp"

using namespace tandem;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CACHE_DIR\n", argv[0]);
    return 2;
  }
  tandem_test::use_empty_cache_dir(argv[1]);

  Backend& be = get_backend("openmp");
  const std::int64_t n = 1 << 16, m = 520, k = 1100, cols = 300;  // m * k * cols > 512^3
  int right = 0;
  // Everything that may need the tuning, the uploads included, inside the region.
#pragma omp parallel num_threads(2) reduction(+ : right)
  {
    const Buffer x = Buffer::from(be, std::vector<float>(n, 1.5f)), y = Buffer::from(be, std::vector<float>(n, 2.0f));
    const Buffer a = Buffer::from(be, std::vector<float>(m * k, 1.0f));
    const Buffer b = Buffer::from(be, std::vector<float>(k * cols, 0.5f));
    Buffer sum(be, DType::f32, n), product(be, DType::f32, m * cols);
    add(x, y, sum);
    Matrix c = matrix(product, m, cols);
    matmul(matrix(a, m, k), matrix(b, k, cols), c);
    bool ok = true;
    for (float v : sum.to_vector<float>()) ok = ok && v == 3.5f;
    for (float v : product.to_vector<float>()) ok = ok && v == 550.0f;
    right += ok ? 1 : 0;
  }
  for (const auto& [what, how] : be.properties().tuning) std::printf("%s: %s\n", what.c_str(), how.c_str());
  std::printf("cache files: %zu\nresults: %s\n", tandem_test::cache_files(argv[1]), right == 2 ? "right" : "WRONG");
  return right == 2 ? 0 : 1;
}
