// Cases for matmul: every tier the backend has x f32, f64, f16, bf16 inputs x edge shapes,
// shapes past one cache block or tile, transposed operands, leading dimensions > columns, and
// alpha/beta (beta = 0 must not read C: C starts poisoned with NaN).
// Bound: |C - Cref| <= gamma(k + 3, u) (|alpha| |op(A)| |op(B)| + |beta| |C0|) + the same in f64
// for the reference itself.
#include <cmath>

#include "cases.hpp"

namespace tandem::verify::detail {

namespace {

struct Problem {
  std::int64_t m, n, k;
  Transpose ta = Transpose::no, tb = Transpose::no;
  std::int64_t pad = 0;  // every leading dimension = its minimum + pad
  double alpha = 1, beta = 0;
};

std::string label(const Problem& p) {
  std::string s = std::to_string(p.m) + "x" + std::to_string(p.n) + "x" + std::to_string(p.k);
  if (p.ta == Transpose::yes) s += " tA";
  if (p.tb == Transpose::yes) s += " tB";
  if (p.pad) s += " ld+" + std::to_string(p.pad);
  if (p.alpha != 1 || p.beta != 0) {
    char buf[48];
    std::snprintf(buf, sizeof buf, " a=%g b=%g", p.alpha, p.beta);
    s += buf;
  }
  return s;
}

std::vector<Problem> problems(bool quick) {
  if (quick) {
    return {{0, 5, 3}, {4, 5, 0, Transpose::no, Transpose::no, 0, 1, 0.5}, {1, 1, 1}, {33, 31, 33},
            {31, 33, 32, Transpose::yes, Transpose::yes, 3, -1.5, 0.5}, {200, 300, 400}};
  }
  return {
      {0, 5, 3},
      {5, 0, 3},
      {4, 5, 0, Transpose::no, Transpose::no, 0, 1, 0.5},  // k = 0: C = beta C
      {4, 5, 0},                                           // k = 0, beta = 0: C = 0, its NaNs gone
      {1, 1, 1},
      {2, 2, 2},
      {31, 33, 32},
      {32, 32, 32},
      {33, 31, 33},
      {1, 257, 100},
      {100, 1, 257},
      {33, 31, 33, Transpose::yes, Transpose::no},
      {33, 31, 33, Transpose::no, Transpose::yes},
      {31, 33, 32, Transpose::yes, Transpose::yes, 3, -1.5, 0.5},
      {33, 31, 33, Transpose::no, Transpose::no, 7, 0.75, 0},
      {200, 300, 400},                                    // past the register_blocked mc and kc blocks
      {67, 530, 400, Transpose::yes, Transpose::no, 2, 1, 1},  // past the tiled tier's (256, 512) tile
      {3, 3100, 20, Transpose::no, Transpose::yes},            // past the register_blocked nc column block
  };
}

}  // namespace

void add_matmul_cases(std::vector<CheckCase>& out, const Backend& be, const CheckOptions& o) {
  for (DType ab : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    const DType ct = ab == DType::f64 ? DType::f64 : DType::f32;
    for (MatmulTier tier : be.matmul_tiers(ab)) {
      for (const Problem& p : problems(o.quick)) {
        CheckCase c{"matmul", "matmul", std::string(name_of(tier)), std::string(name_of(ab)), label(p), {}};
        c.run = [c, ab, ct, tier, p, o](Backend& tested, Backend& ref, std::uint64_t seed) {
          auto rng = case_rng(seed, c);
          // Stored shapes: A is (m, k) or (k, m) when transposed; B likewise.
          const std::int64_t ar = p.ta == Transpose::no ? p.m : p.k, ac = p.ta == Transpose::no ? p.k : p.m;
          const std::int64_t br = p.tb == Transpose::no ? p.k : p.n, bc = p.tb == Transpose::no ? p.n : p.k;
          const std::int64_t lda = std::max<std::int64_t>(ac, 1) + p.pad, ldb = std::max<std::int64_t>(bc, 1) + p.pad,
                             ldc = std::max<std::int64_t>(p.n, 1) + p.pad;
          auto span = [](std::int64_t r, std::int64_t cols, std::int64_t ld) {
            return r == 0 || cols == 0 ? std::size_t(0) : static_cast<std::size_t>((r - 1) * ld + cols);
          };
          Host a = random_values(rng, ab, span(ar, ac, lda)), b = random_values(rng, ab, span(br, bc, ldb));
          if (o.non_finite) plant_non_finite(rng, a);
          const std::size_t cspan = span(p.m, p.n, ldc);
          Host c0 = p.beta != 0 ? random_values(rng, ct, cspan) : Host(cspan, std::nan(""));
          CaseResult r = result_for(c, tested);
          MatmulOptions opts{p.ta, p.tb, p.alpha, p.beta, tier};
          Output got = make_output(tested, ct, cspan, &c0);
          Matrix gc = matrix(got.inner, p.m, p.n, ldc);
          matmul(matrix(upload(tested, ab, a), ar, ac, lda), matrix(upload(tested, ab, b), br, bc, ldb), gc, opts);
          // Oracle: the same values in f64 on the reference backend.
          Buffer want = upload(ref, DType::f64, c0);
          Matrix wc = matrix(want, p.m, p.n, ldc);
          opts.tier = MatmulTier::automatic;
          matmul(matrix(upload(ref, DType::f64, a), ar, ac, lda), matrix(upload(ref, DType::f64, b), br, bc, ldb), wc, opts);
          const Host e = download(want);
          // Bound from |A||B|, computed here in double.
          Host bound(cspan, 0.0);
          const double g = gamma(static_cast<double>(p.k + 3), u_of(ct)) + gamma(static_cast<double>(p.k + 2), u64());
          for (std::int64_t i = 0; i < p.m; ++i) {
            for (std::int64_t j = 0; j < p.n; ++j) {
              double abs_ab = 0;
              for (std::int64_t q = 0; q < p.k; ++q) {
                const double aiq = p.ta == Transpose::no ? a[i * lda + q] : a[q * lda + i];
                const double bqj = p.tb == Transpose::no ? b[q * ldb + j] : b[j * ldb + q];
                abs_ab += std::fabs(aiq * bqj);
              }
              const double c_in = p.beta != 0 ? std::fabs(p.beta * c0[i * ldc + j]) : 0;
              bound[i * ldc + j] = g * (std::fabs(p.alpha) * abs_ab + c_in) + u_of(ct) * std::fabs(e[i * ldc + j]);
            }
          }
          finish(r, got, e, bound);
          return r;
        };
        out.push_back(std::move(c));
      }
    }
  }
}

}  // namespace tandem::verify::detail
