// Closed forms on every CPU backend, the reference included: results a person can check by hand,
// so the oracle is itself held to something outside it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "tandem/tandem.hpp"

using namespace tandem;

namespace {
std::vector<std::string> cpu_backends() {
  std::vector<std::string> names = {"reference"};
#ifdef TANDEM_TEST_HAVE_OPENMP
  names.push_back("openmp");
#endif
#ifdef TANDEM_TEST_HAVE_KOKKOS
  names.push_back("kokkos");  // a CPU backend where Debian's Kokkos (Serial) is what it runs on
#endif
  return names;
}
}  // namespace

TEST_CASE("exclusive scan of i is i(i-1)/2, inclusive i(i+1)/2") {
  for (const auto& name : cpu_backends()) {
    Backend& be = get_backend(name);
    for (std::size_t n : {std::size_t(1), std::size_t(1000), std::size_t(200003)}) {
      std::vector<double> iota(n);
      std::iota(iota.begin(), iota.end(), 0.0);
      Buffer x = Buffer::from(be, iota), out(be, DType::f64, n);
      exclusive_scan(x, out);
      auto v = out.to_vector<double>();
      for (std::size_t i = 0; i < n; i += 997) CHECK(v[i] == double(i) * (double(i) - 1) / 2);
      CHECK(v[n - 1] == double(n - 1) * double(n - 2) / 2);
      inclusive_scan(x, x);  // in place
      v = x.to_vector<double>();
      CHECK(v[n - 1] == double(n - 1) * double(n) / 2);
    }
    // i32 sums and scans wrap modulo 2^32, identically everywhere, on the parallel path too.
    const std::size_t m = 100003;
    std::vector<std::int32_t> near_max(m);
    std::uint32_t wrapped = 0;
    std::vector<std::int32_t> prefix(m);
    for (std::size_t i = 0; i < m; ++i) {
      near_max[i] = 2147480000 - std::int32_t(i % 1000);
      wrapped += std::uint32_t(near_max[i]);
      prefix[i] = std::int32_t(wrapped);
    }
    Buffer big = Buffer::from(be, near_max), scanned(be, DType::i32, m);
    CHECK(sum(big) == double(std::int32_t(wrapped)));
    inclusive_scan(big, scanned);
    CHECK(scanned.to_vector<std::int32_t>() == prefix);
  }
}

TEST_CASE("sums, extremes, argmax ties and norms of known vectors") {
  for (const auto& name : cpu_backends()) {
    Backend& be = get_backend(name);
    std::vector<float> h(100000);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = float(i % 7);
    Buffer x = Buffer::from(be, h);
    double expect = 0;
    for (float v : h) expect += v;
    CHECK(sum(x) == expect);  // small integers: exact in f32
    CHECK(max(x) == 6);
    CHECK(min(x) == 0);
    CHECK(argmax(x) == 6);  // first of the tied maxima
    h[77777] = NAN;
    h[88888] = NAN;
    Buffer y = Buffer::from(be, h);
    CHECK(std::isnan(max(y)));
    CHECK(argmax(y) == 77777);  // the first NaN
    Buffer three_four = Buffer::from(be, std::vector<double>{3, 4});
    CHECK(norm2(three_four) == 5);
    CHECK(dot(three_four, three_four) == 25);
  }
}

TEST_CASE("extremes and NaN found in every part of a long vector") {
  // Past the per-thread stream split (4 sub-chunks per thread at >= 65536 elements each): the
  // extreme or NaN sits in each sub-chunk of each thread in turn, and in the tails.
  const std::size_t n = 1200013;
  std::vector<std::size_t> at = {0, n - 1, n / 2, n / 2 - 1};
  for (std::size_t k = 1; k < 16; ++k) at.push_back(n * k / 16 + k);
  for (const auto& name : cpu_backends()) {
    Backend& be = get_backend(name);
    std::vector<float> h(n);
    for (std::size_t i = 0; i < n; ++i) h[i] = float(i % 1000) * 0.5f;
    for (std::size_t p : at) {
      CAPTURE(name);
      CAPTURE(p);
      std::vector<float> v = h;
      v[p] = 1e6f;
      v[(p + n / 3) % n] = -1e6f;
      Buffer x = Buffer::from(be, v);
      CHECK(max(x) == 1e6f);
      CHECK(min(x) == -1e6f);
      CHECK(argmax(x) == std::int64_t(p));
      v[p] = NAN;
      Buffer y = Buffer::from(be, v);
      CHECK(std::isnan(max(y)));
      CHECK(std::isnan(min(y)));
      CHECK(argmax(y) == std::int64_t(p));
    }
  }
}

TEST_CASE("extremes of vectors holding only infinities or only the largest finite value") {
  // A reduction that starts from the largest finite value (Kokkos' identity for Max<float> is
  // -FLT_MAX) gave -FLT_MAX and argmax -1 for a vector of -Inf alone.
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& name : cpu_backends()) {
    Backend& be = get_backend(name);
    for (std::size_t n : {std::size_t(1), std::size_t(5000), std::size_t(300007)}) {
      CAPTURE(name);
      CAPTURE(n);
      const Buffer low = Buffer::from(be, std::vector<float>(n, -INFINITY));
      const Buffer high = Buffer::from(be, std::vector<float>(n, INFINITY));
      CHECK(max(low) == -inf);
      CHECK(min(low) == -inf);
      CHECK(argmax(low) == 0);
      CHECK(min(high) == inf);
      CHECK(max(high) == inf);
      std::vector<double> lowest(n + 1, -std::numeric_limits<double>::max());
      lowest[n / 2 + 1] = -inf;
      const Buffer finite = Buffer::from(be, lowest);
      CHECK(max(finite) == -std::numeric_limits<double>::max());
      CHECK(min(finite) == -inf);
      CHECK(argmax(finite) == 0);
    }
  }
}

TEST_CASE("scans larger than the last-level cache, into aligned and unaligned outputs") {
  // Past the last-level cache a backend may write with streaming stores (kokkos, openmp): each
  // path, and the parts a host scan is cut into, must give the exact prefix sums of small integers.
  for (const auto& name : cpu_backends()) {
    Backend& be = get_backend(name);
    const std::size_t llc = std::max<std::size_t>(be.properties().l3_cache_bytes, std::size_t(8) << 20);
    const std::size_t n = llc / sizeof(float) + 4099;
    std::vector<float> h(n);
    for (std::size_t i = 0; i < n; ++i) h[i] = float(int(i % 5) - 2);  // prefix sums stay in [-2, 2]
    const Buffer x = Buffer::from(be, h);
    Buffer out(be, DType::f32, n + 1);
    for (std::size_t offset : {std::size_t(0), std::size_t(1)}) {
      for (bool inclusive : {true, false}) {
        CAPTURE(name);
        CAPTURE(offset);
        CAPTURE(inclusive);
        Buffer o = out.slice(offset, n);
        if (inclusive) {
          inclusive_scan(x, o);
        } else {
          exclusive_scan(x, o);
        }
        const auto got = o.to_vector<float>();
        float running = 0;
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < n; ++i) {
          if (!inclusive) wrong += got[i] != running;
          running += h[i];
          if (inclusive) wrong += got[i] != running;
        }
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("f32 norm2 of values whose squares overflow or underflow f32") {
  // sqrt(n) * v for n copies of v: 3e20^2 overflows f32, 2e-25^2 underflows it; both must come out
  // right (the fast f32 pass falls back to double), at a size past the parallel and stream splits.
  for (const auto& name : cpu_backends()) {
    Backend& be = get_backend(name);
    for (std::size_t n : {std::size_t(7), std::size_t(300007)}) {
      for (float v : {3e20f, 2e-25f, -1.5f}) {
        CAPTURE(name);
        CAPTURE(n);
        CAPTURE(v);
        const Buffer x = Buffer::from(be, std::vector<float>(n, v));
        const double want = std::sqrt(double(n)) * std::fabs(double(v));
        CHECK(std::fabs(norm2(x) - want) <= 1e-6 * want);
      }
    }
  }
}

TEST_CASE("matmul of small known matrices, with transposes and leading dimensions") {
  for (const auto& name : cpu_backends()) {
    Backend& be = get_backend(name);
    for (MatmulTier tier : be.matmul_tiers(DType::f64)) {
      CAPTURE(name);
      CAPTURE(std::string(name_of(tier)));
      // A = [1 2 3; 4 5 6] stored with ld 4; B = [7 8; 9 10; 11 12].
      Buffer a = Buffer::from(be, std::vector<double>{1, 2, 3, -99, 4, 5, 6, -99});
      Buffer b = Buffer::from(be, std::vector<double>{7, 8, 9, 10, 11, 12});
      Buffer c = Buffer::from(be, std::vector<double>{1, 1, 1, 1});
      Matrix cm = matrix(c, 2, 2);
      MatmulOptions o;
      o.tier = tier;
      o.alpha = 2;
      o.beta = -1;
      matmul(matrix(a, 2, 3, 4), matrix(b, 3, 2), cm, o);
      CHECK(c.to_vector<double>() == std::vector<double>{2 * 58 - 1, 2 * 64 - 1, 2 * 139 - 1, 2 * 154 - 1});
      // (B^T)^T = B: op(B^T) with trans_b on a (2, 3) view of B's transpose.
      Buffer bt = Buffer::from(be, std::vector<double>{7, 9, 11, 8, 10, 12});
      o = MatmulOptions{Transpose::no, Transpose::yes, 1, 0, tier};
      c.fill(NAN);  // beta = 0: C must not be read
      matmul(matrix(a, 2, 3, 4), matrix(bt, 2, 3), cm, o);
      CHECK(c.to_vector<double>() == std::vector<double>{58, 64, 139, 154});
    }
  }
}

TEST_CASE("softmax of equal logits is uniform and its loss is log(classes)") {
  for (const auto& name : cpu_backends()) {
    Backend& be = get_backend(name);
    const std::int64_t rows = 3, cols = 4;
    Buffer logits = Buffer::from(be, std::vector<double>(12, 1000.0));  // large: needs the max subtraction
    Buffer labels = Buffer::from(be, std::vector<std::int32_t>{0, 3, 4});
    Buffer probs(be, DType::f64, 12), losses(be, DType::f64, 3);
    Matrix pm = matrix(probs, rows, cols);
    // Label 4 is out of range: refused, naming the row, before anything is written.
    CHECK_THROWS_WITH_AS(softmax_cross_entropy(matrix(logits, rows, cols), labels, pm, losses),
                         doctest::Contains("label 4 in row 2"), InvalidArgument);
    Buffer negative = Buffer::from(be, std::vector<std::int32_t>{0, -1, 1});
    CHECK_THROWS_AS(softmax_cross_entropy(matrix(logits, rows, cols), negative, pm, losses), InvalidArgument);
    // A caller that vouches for its labels skips the read-back: the row's loss is then NaN.
    softmax_cross_entropy(matrix(logits, rows, cols), labels, pm, losses, {}, LabelCheck::trusted);
    for (double p : probs.to_vector<double>()) CHECK(p == doctest::Approx(0.25).epsilon(1e-15));
    const auto l = losses.to_vector<double>();
    CHECK(l[0] == doctest::Approx(std::log(4.0)).epsilon(1e-15));
    CHECK(l[1] == doctest::Approx(std::log(4.0)).epsilon(1e-15));
    CHECK(std::isnan(l[2]));
  }
}

#ifdef TANDEM_TEST_HAVE_OPENMP
TEST_CASE("f32 matmul large enough for the calibrated cache blocking, exact on small integers") {
  // 520 x 300 x 1100 (more than 512^3 multiply-adds): the register_blocked tier takes the blocking
  // its calibration chose (gemm_tuning), whose k blocks (up to 1024) and A blocks this crosses.
  // Entries in [-2, 2]: every partial sum is an integer far below 2^24, so f32 is exact in any order.
  Backend& be = get_backend("openmp");
  const std::int64_t m = 520, n = 300, k = 1100;
  std::vector<float> ha(static_cast<std::size_t>(m * k)), hb(static_cast<std::size_t>(k * n));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t p = 0; p < k; ++p) ha[i * k + p] = float((i * 3 + p) % 5 - 2);
  }
  for (std::int64_t p = 0; p < k; ++p) {
    for (std::int64_t j = 0; j < n; ++j) hb[p * n + j] = float((p + 2 * j) % 5 - 2);
  }
  std::vector<float> want(static_cast<std::size_t>(m * n), 0.0f);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t p = 0; p < k; ++p) {
      const float a = ha[i * k + p];
      for (std::int64_t j = 0; j < n; ++j) want[i * n + j] += a * hb[p * n + j];
    }
  }
  Buffer a = Buffer::from(be, ha), b = Buffer::from(be, hb), c(be, DType::f32, m * n);
  c.fill(NAN);  // beta = 0: C must not be read
  Matrix cm = matrix(c, m, n);
  MatmulOptions o;
  o.tier = MatmulTier::register_blocked;
  matmul(matrix(a, m, k), matrix(b, k, n), cm, o);
  const auto got = c.to_vector<float>();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) wrong += got[i] != want[i];
  CHECK(wrong == 0);
}
#endif
