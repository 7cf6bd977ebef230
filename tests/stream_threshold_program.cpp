// Which openmp ops take the large-output path (interleaved runs, streaming stores, the sums' and
// the scan's tuned prefetch) is decided by the bytes they move, their distinct inputs and output
// together, against TANDEM_OPENMP_STREAM_FROM. Observed through the store tuning: the first op
// on that path asks for it, which calibrates and writes its cache file; an op below the threshold
// writes none. Run in a fresh process with TANDEM_OPENMP_STREAM_FROM set as
// the case says (n = 65536 floats, 256 KiB an array):
//   elementwise  3 arrays (786432): relu, add(x, x), add in place below; add(x, y, z) at it
//   sums         2 arrays (524288): sum, dot(x, x) below; dot(x, y) at it
//   scan         2 arrays (524288): a scan in place below; into another buffer at it
//   copy         2 arrays (524288): a copy of half as many floats below; of n at it
// argv[1] is the cache directory (emptied first), argv[2] the case.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tandem/tandem.hpp"
#include "tuning_cache_dir.hpp"

using namespace tandem;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CACHE_DIR elementwise|sums|scan|copy\n", argv[0]);
    return 2;
  }
  tandem_test::use_empty_cache_dir(argv[1]);
  const std::string which = argv[2];

  Backend& be = get_backend("openmp");
  const std::size_t n = std::size_t(1) << 16;
  // Filled, not uploaded: an upload is a copy of two arrays' bytes, past the copy case's threshold.
  Buffer x(be, DType::f32, n), y(be, DType::f32, n), z(be, DType::f32, n), r(be, DType::f32, 1);
  Buffer half_a(be, DType::f32, n / 2), half_b(be, DType::f32, n / 2);
  fill(x, 1.5);
  fill(y, 2.0);
  fill(half_a, 1.0);

  std::function<void()> below, at;
  double expected = 0;  // z[n - 1] after `at` (r[0] for the sums)
  if (which == "elementwise") {
    below = [&] {
      relu(x, z);
      add(x, x, z);
      add(y, x, y);  // in place: y = 3.5
    };
    at = [&] { add(x, y, z); };
    expected = 5.0;
  } else if (which == "sums") {
    below = [&] {
      reduce(ReduceOp::sum, x, r);
      dot(x, x, r);
    };
    at = [&] { dot(x, y, r); };
    expected = 1.5 * 2.0 * double(n);
  } else if (which == "scan") {
    below = [&] { inclusive_scan(y, y); };  // y[i] = 2 (i + 1)
    at = [&] { inclusive_scan(x, z); };
    expected = 1.5 * double(n);
  } else if (which == "copy") {
    below = [&] { copy(half_a, half_b); };
    at = [&] { copy(x, z); };
    expected = 1.5;
  } else {
    std::fprintf(stderr, "unknown case '%s': give elementwise, sums, scan or copy\n", which.c_str());
    return 2;
  }

  below();
  // The store tuning's file alone: the threshold from which loops run on the team is measured
  // and cached by the first op of any size.
  const std::size_t after_below = tandem_test::cache_files(argv[1], "openmp-stores-");
  at();
  const std::size_t after_at = tandem_test::cache_files(argv[1], "openmp-stores-");
  const double got = which == "sums" ? double(r.to_vector<float>()[0]) : double(z.to_vector<float>()[n - 1]);
  const bool right = got == expected;
  std::printf(
      "%s: cache files after the ops below the threshold: %zu, after the op at it: %zu; result %s (%g, expected %g)\n",
      which.c_str(), after_below, after_at, right ? "right" : "WRONG", got, expected);
  const bool ok = after_below == 0 && after_at > 0 && right;
  std::printf("%s\n",
              ok ? "ok" : "FAILED: expected no cache file below the threshold, one at it, and the right result");
  return ok ? 0 : 1;
}
