// The vectorised exp of the openmp softmax (backends/openmp/vexp.inl), measured in ulps against
// double-precision exp over a dense sweep of the floats where its result is finite and non-zero,
// and at its special values. The kernels compiled per ISA run the same code (with FMA
// contraction on AVX2 and AVX-512, which only removes roundings); the oracle checks them there.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace {
typedef float vf __attribute__((vector_size(16)));
typedef std::int32_t vi __attribute__((vector_size(16)));
#include "../backends/openmp/vexp.inl"

float vexp1(float x) {
  const vf v = vexp<vf, vi>(vf{} + x);
  return v[0];
}

// How many floats lie between a and b (both finite, same sign or zero).
double ulps_between(float a, float b) {
  std::int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  return std::fabs(double(ia) - double(ib));
}
}  // namespace

TEST_CASE("vectorised exp: within 1 ulp of exp, normal or subnormal") {
  double worst_normal = 0, worst_subnormal = 0;
  float at_normal = 0;
  std::size_t checked = 0;
  // Every 61st float from -103.9 (results down to the smallest subnormals) to 88.7 (up to FLT_MAX).
  auto bits_of = [](float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
  };
  auto check = [&](float x) {
    const float got = vexp1(x);
    const float want = static_cast<float>(std::exp(double(x)));  // correctly rounded but for ties
    const double err = ulps_between(got, want);
    if (want >= std::numeric_limits<float>::min()) {
      if (err > worst_normal) worst_normal = err, at_normal = x;
    } else {
      worst_subnormal = std::max(worst_subnormal, err);
    }
    ++checked;
  };
  for (std::uint32_t m = 0; m <= bits_of(103.9f); m += 61) {
    float x;
    std::memcpy(&x, &m, 4);
    check(-x);
    if (m <= bits_of(88.7f)) check(x);
  }
  CAPTURE(at_normal);
  CHECK(checked > 1000000);
  CHECK(worst_normal <= 1);
  CHECK(worst_subnormal <= 1);
}

TEST_CASE("vectorised exp: special values as std::exp has them") {
  CHECK(vexp1(0.0f) == 1.0f);
  CHECK(vexp1(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(vexp1(std::numeric_limits<float>::infinity()) == std::numeric_limits<float>::infinity());
  CHECK(vexp1(89.0f) == std::numeric_limits<float>::infinity());
  CHECK(vexp1(-200.0f) == 0.0f);
  CHECK(std::isnan(vexp1(std::numeric_limits<float>::quiet_NaN())));
  CHECK(vexp1(-87.5f) > 0.0f);  // below the smallest normal result: a subnormal, not 0
  CHECK(vexp1(-87.5f) < std::numeric_limits<float>::min());
}
