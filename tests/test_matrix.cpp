// The cross-backend test matrix: every verification case of a family on the backend under test
// (one CTest entry per backend x family), compared with the float64 reference. Written once;
// CMake registers it for each backend with --tandem-backend=NAME.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "support.hpp"
#include "tandem/tandem.hpp"
#include "tandem/verify.hpp"

namespace {

using namespace tandem;

// The backend under test, or nullptr after printing SKIPPED with the reason. The runs that cap
// openmp's kernels at an ISA (TANDEM_CPU_ISA) name it in TANDEM_TEST_SKIP_IF_WIDEST too: on a CPU
// whose widest kernels are that ISA, the plain openmp matrix has run them already. A run of a path
// only some CPUs have names their ISA in TANDEM_TEST_NEEDS_ISA.
Backend* backend_or_skip() {
  if (const char* isa = std::getenv("TANDEM_TEST_SKIP_IF_WIDEST"); isa != nullptr && test::widest_isa() == isa) {
    std::printf("SKIPPED: %s is this CPU's widest ISA: the plain openmp matrix ran these kernels\n", isa);
    return nullptr;
  }
  if (const char* isa = std::getenv("TANDEM_TEST_NEEDS_ISA");
      isa != nullptr && test::isa_rank(test::widest_isa()) < test::isa_rank(isa)) {
    std::printf("SKIPPED: this run needs %s kernels; this CPU's widest are %s\n", isa, test::widest_isa().c_str());
    return nullptr;
  }
  return test::backend_or_skip();
}

void run_family(const std::string& family, bool non_finite) {
  Backend* be = backend_or_skip();
  if (be == nullptr) return;
  Backend& reference = get_backend("reference");
  verify::CheckOptions options;
  options.non_finite = non_finite;
  int ran = 0;
  double worst = 0;
  for (const auto& c : verify::cases(*be, options)) {
    if (c.family != family) continue;
    test::watch_case(c.algorithm + " " + be->name() + " " + c.tier + " " + c.dtype + " " + c.size);
    const verify::CaseResult r = verify::run_case(c, *be, reference, test::seed());
    ++ran;
    worst = std::max(worst, r.comparison.worst_share);
    INFO(c.algorithm, " ", c.tier, " ", c.dtype, " ", c.size, " on ", be->name());
    CHECK_MESSAGE(r.error.empty(), r.error);
    CHECK_MESSAGE(r.guard_failure.empty(), r.guard_failure);
    CHECK_MESSAGE(r.comparison.ok(), r.comparison.describe());
  }
  std::printf("%s on %s: %d cases, worst error %.3g%% of its bound\n", family.c_str(), be->name().c_str(), ran,
              worst * 100);
  CHECK(ran > 0);
}

}  // namespace

TEST_CASE("elementwise") { run_family("elementwise", false); }
TEST_CASE("matrix") { run_family("matrix", false); }
TEST_CASE("matmul") { run_family("matmul", false); }
TEST_CASE("reduce") { run_family("reduce", false); }
TEST_CASE("scan") { run_family("scan", false); }
TEST_CASE("ml") { run_family("ml", false); }
TEST_CASE("non_finite") {
  for (const auto& family : verify::families()) run_family(family, true);
}

// Slices at every element offset within 16 bytes, in and out, past the sizes where CPU loops go
// parallel and split into streams: vectorised paths have a misaligned head, an aligned body and a
// tail. (Registered again with TANDEM_OPENMP_STREAM_FROM=0, where every such output streams.)
TEST_CASE("slices at every alignment") {
  Backend* be = backend_or_skip();
  if (be == nullptr) return;
  const std::size_t n = 300007;
  std::mt19937 rng(static_cast<unsigned>(test::seed()));
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> hx(n + 3), hy(n + 3);
  for (float& v : hx) v = dist(rng);
  for (float& v : hy) v = dist(rng);
  const Buffer x_all = Buffer::from(*be, hx), y_all = Buffer::from(*be, hy);
  Buffer out_all(*be, DType::f32, n + 3);
  std::vector<float> got(n);
  for (std::size_t in_at = 0; in_at < 4; in_at += 3) {
    for (std::size_t out_at = 0; out_at < 4; ++out_at) {
      CAPTURE(in_at);
      CAPTURE(out_at);
      const Buffer x = x_all.slice(in_at, n), y = y_all.slice(in_at, n);
      Buffer out = out_all.slice(out_at, n);
      const float* px = hx.data() + in_at;
      const float* py = hy.data() + in_at;
      // Elementwise results are one rounding of exact inputs: the same on every backend.
      add(x, y, out);
      out.download(std::span<float>(got));
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < n; ++i) wrong += got[i] != px[i] + py[i];
      CHECK_MESSAGE(wrong == 0, "add: ", wrong, " wrong elements");
      scale(2.0, x, out);
      out.download(std::span<float>(got));
      wrong = 0;
      for (std::size_t i = 0; i < n; ++i) wrong += got[i] != 2 * px[i];
      CHECK_MESSAGE(wrong == 0, "scale: ", wrong, " wrong elements");
      // Scans: each prefix within gamma(i + 1) of its sum of magnitudes (f32), first failure shown.
      for (bool inclusive : {true, false}) {
        inclusive ? inclusive_scan(x, out) : exclusive_scan(x, out);
        out.download(std::span<float>(got));
        double exact = 0, magnitude = 0;
        std::size_t bad = n;
        for (std::size_t i = 0; i < n && bad == n; ++i) {
          const double before = exact, before_magnitude = magnitude;
          exact += px[i];
          magnitude += std::fabs(px[i]);
          const double want = inclusive ? exact : before;
          const double bound = 1.2e-7 * double(i + 2) * (inclusive ? magnitude : before_magnitude) + 1e-30;
          if (std::fabs(got[i] - want) > bound) bad = i;
        }
        CHECK_MESSAGE(bad == n, (inclusive ? "inclusive" : "exclusive"), " scan wrong from element ", bad);
      }
      if (out_at != 0) continue;
      // Reductions read the same misaligned inputs.
      double s = 0, d = 0, q = 0, magnitude = 0, dot_magnitude = 0;
      for (std::size_t i = 0; i < n; ++i) {
        s += px[i];
        d += double(px[i]) * py[i];
        q += double(px[i]) * px[i];
        magnitude += std::fabs(px[i]);
        dot_magnitude += std::fabs(double(px[i]) * py[i]);
      }
      const double u = 6e-8 * double(n + 2);
      CHECK(std::fabs(sum(x) - s) <= u * magnitude);
      CHECK(std::fabs(dot(x, y) - d) <= u * dot_magnitude);
      CHECK(std::fabs(norm2(x) - std::sqrt(q)) <= u * std::sqrt(q));
    }
  }
}

TEST_CASE("managed memory: the host writes, the device computes, the host reads") {
  Backend* be = backend_or_skip();
  if (be == nullptr) return;
  if (!be->has_managed_memory()) {
    // No managed memory here (CPU backends): asking for it says so instead of handing back
    // something else.
    CHECK_THROWS_AS(Buffer::managed(*be, DType::f32, 16), Unsupported);
    std::printf("managed memory on %s: none, Unsupported raised as documented\n", be->name().c_str());
    return;
  }
  const std::size_t n = 100003;
  Buffer x = Buffer::managed(*be, DType::f32, n), y = Buffer::managed(*be, DType::f32, n);
  Buffer out = Buffer::managed(*be, DType::f32, n), total = Buffer::managed(*be, DType::f32, 1);
  CHECK(x.is_managed());
  std::span<float> hx = x.host_span<float>(), hy = y.host_span<float>();
  for (std::size_t i = 0; i < n; ++i) {
    hx[i] = float(i % 1000);
    hy[i] = 0.5f;
  }
  add(x, y, out);
  tandem::reduce(ReduceOp::sum, x, total);
  be->synchronize(Queue{});
  std::size_t wrong = 0;
  double want = 0;
  for (std::size_t i = 0; i < n; ++i) {
    wrong += out.host_span<float>()[i] != float(i % 1000) + 0.5f;
    want += float(i % 1000);
  }
  CHECK_MESSAGE(wrong == 0, "add into managed memory: ", wrong, " wrong elements");
  CHECK(std::fabs(total.host_span<float>()[0] - want) <= 1e-6 * want);
  // Managed buffers work with every other buffer operation too, and device buffers still refuse
  // host access.
  CHECK(out.to_vector<float>()[7] == 7.5f);
  Buffer device(*be, DType::f32, 4);
  CHECK_THROWS_AS(device.host_span<float>(), InvalidArgument);
  CHECK_THROWS_AS(x.host_span<double>(), DTypeMismatch);
}
