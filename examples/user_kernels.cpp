// One kernel source (examples/saxpy_kernels.cpp) run on every backend this program was built for,
// each result checked against the same computation on the host (docs/kernels.md).
//   user_kernels [backend...]     default: every backend available here
#include <cmath>
#include <cstdio>
#include <string>
#include <tandem/kernels.hpp>
#include <tandem/tandem.hpp>
#include <vector>

TANDEM_IMPORT(saxpy, void(tandem::Backend&, float, const tandem::Buffer&, tandem::Buffer&));
TANDEM_IMPORT(sum, void(tandem::Backend&, const tandem::Buffer&, tandem::Buffer&));
TANDEM_IMPORT(squares, double(tandem::Backend&, const tandem::Buffer&));
TANDEM_IMPORT(halve, void(tandem::Backend&, tandem::Buffer&));

namespace {

// Runs the four functions on one backend; false when a result differs from the host's.
bool run_on(tandem::Backend& backend) {
  const std::size_t n = 100003;  // not a multiple of a block
  std::vector<float> x(n), y(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = float(i % 13) - 6;  // small integers: every sum below is exact in float
    y[i] = float(i % 5);
  }
  tandem::Buffer bx = tandem::Buffer::from(backend, x), by = tandem::Buffer::from(backend, y);
  tandem::Buffer total(backend, tandem::DType::f32, 1);
  saxpy(backend, 2.0f, bx, by);
  sum(backend, by, total);
  const double sq = squares(backend, bx);
  halve(backend, by);

  double want_sum = 0, want_sq = 0;
  bool same = true;
  const std::vector<float> got = by.to_vector<float>();
  for (std::size_t i = 0; i < n; ++i) {
    const float s = 2.0f * x[i] + y[i];
    want_sum += s;
    want_sq += double(x[i]) * x[i];
    same = same && got[i] == 0.5f * s;
  }
  const float got_sum = total.to_vector<float>()[0];
  const bool ok = same && got_sum == float(want_sum) && sq == want_sq;
  std::printf("%-10s saxpy+halve %s, sum %.0f (want %.0f), squares %.0f (want %.0f): %s\n", backend.name().c_str(),
              same ? "equal" : "DIFFER", double(got_sum), want_sum, sq, want_sq, ok ? "ok" : "WRONG");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> names(argv + 1, argv + argc);
  if (names.empty()) {
    for (const tandem::BackendInfo& b : tandem::backends()) {
      if (b.available) names.push_back(b.name);
    }
  }
  int wrong = 0;
  for (const std::string& name : names) {
    try {
      tandem::Backend& backend = tandem::get_backend(name);
      if (!saxpy.compiled_for(backend)) {
        std::printf("%-10s SKIPPED: the kernels were not compiled for it\n", name.c_str());
        continue;
      }
      wrong += run_on(backend) ? 0 : 1;
    } catch (const tandem::Error& e) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), e.what());
      ++wrong;
    }
  }
  return wrong == 0 ? 0 : 1;
}
