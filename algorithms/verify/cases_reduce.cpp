// Cases for reductions, scans and the ML helpers.
//   sum: gamma(n, u) sum |x|        dot: gamma(n + 1, u) sum |x y|      norm2, mse: gamma(n + 4, u) |r|
//   min, max, argmax: exact (argmax: the first maximum, the first NaN if any)
//   scans, per prefix of m terms: gamma(m, u) sum |x| (any tree of additions over exactly those
//   terms, as blocked and parallel scans compute, stays within it)
//   plus, everywhere, the reference's own error in f64 (the same bound with u = 2^-53) and the
//   rounding of the result; i32 sums and scans: exact, wrapping modulo 2^32.
#include <cmath>

#include "cases.hpp"

namespace tandem::verify::detail {

namespace {

bool integer(DType t) { return t == DType::i32; }
DType oracle_type(DType t) { return integer(t) ? DType::i32 : DType::f64; }
Host values_for(std::mt19937_64& rng, DType t, std::size_t n, bool non_finite) {
  // Small integers make ties, so argmax's first-index rule is exercised.
  Host x = integer(t) ? random_values(rng, t, n, -20, 20) : random_values(rng, t, n);
  if (non_finite && !integer(t)) plant_non_finite(rng, x);
  return x;
}

// The backend's variants of reduce or scan, or its one default (automatic, shown as "-").
template <class V>
std::vector<V> or_default(std::vector<V> v) {
  if (v.empty()) v.push_back(V::automatic);
  return v;
}
template <class V>
std::string tier_label(V variant) {
  return variant == V::automatic ? "-" : std::string(name_of(variant));
}

}  // namespace

void add_reduce_cases(std::vector<CheckCase>& out, const Backend& backend, const CheckOptions& o) {
  for (DType t : {DType::f32, DType::f64, DType::i32}) {
    const std::string dt(name_of(t));
    for (std::size_t n : vector_sizes(o.quick)) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::max, ReduceOp::argmax, ReduceOp::norm2}) {
        if (integer(t) && op == ReduceOp::norm2) continue;
        if (n == 0 && op != ReduceOp::sum && op != ReduceOp::norm2) continue;  // undefined: a bad-input test
        for (const ReduceVariant variant : or_default(backend.reduce_variants())) {
          CheckCase c{"reduce", std::string(name_of(op)), tier_label(variant), dt, std::to_string(n), {}};
          c.run = [c, t, n, op, o, variant](Backend& be, Backend& ref, std::uint64_t seed) {
            auto rng = case_rng(seed, c);
            const Host x = values_for(rng, t, n, o.non_finite);
            const DType rt = op == ReduceOp::argmax ? DType::i32 : t;
            CaseResult r = result_for(c, be);
            Output got = make_output(be, rt, 1);
            reduce(op, upload(be, t, x), got.inner, {}, variant);
            Buffer want(ref, op == ReduceOp::argmax ? DType::i32 : oracle_type(t), 1);
            reduce(op, upload(ref, oracle_type(t), x), want);
            const Host e = download(want);
            double abs_sum = 0;
            for (double v : x) abs_sum += std::fabs(v);
            double bound = 0;
            const double u = u_of(t), nn = static_cast<double>(n);
            if (!integer(t) && op == ReduceOp::sum)
              bound = (gamma(nn, u) + gamma(nn, u64())) * abs_sum + u * std::fabs(e[0]);
            if (op == ReduceOp::norm2) bound = (gamma(nn + 4, u) + gamma(nn + 4, u64())) * std::fabs(e[0]);
            finish(r, got, e, Host{bound});
            return r;
          };
          out.push_back(std::move(c));
        }
      }
      if (integer(t)) continue;
      CheckCase d{"reduce", "dot", "-", dt, std::to_string(n), {}};
      d.run = [d, t, n, o](Backend& be, Backend& ref, std::uint64_t seed) {
        auto rng = case_rng(seed, d);
        const Host x = values_for(rng, t, n, o.non_finite), y = values_for(rng, t, n, false);
        CaseResult r = result_for(d, be);
        Output got = make_output(be, t, 1);
        dot(upload(be, t, x), upload(be, t, y), got.inner);
        Buffer want(ref, DType::f64, 1);
        dot(upload(ref, DType::f64, x), upload(ref, DType::f64, y), want);
        const Host e = download(want);
        double abs_sum = 0;
        for (std::size_t i = 0; i < n; ++i) abs_sum += std::fabs(x[i] * y[i]);
        const double nn = static_cast<double>(n) + 1;
        finish(r, got, e, Host{(gamma(nn, u_of(t)) + gamma(nn, u64())) * abs_sum + u_of(t) * std::fabs(e[0])});
        return r;
      };
      out.push_back(std::move(d));
    }
    // Per-row and per-column sum and max; shapes include ld > cols and one past the parallel threshold.
    struct Shape {
      std::int64_t rows, cols, pad;
    };
    const std::vector<Shape> shapes = o.quick
                                          ? std::vector<Shape>{{1, 1, 0}, {33, 31, 5}, {300, 301, 0}}
                                          : std::vector<Shape>{{1, 1, 0},   {2, 3, 0},    {31, 33, 0},  {32, 32, 0},
                                                               {33, 31, 5}, {1, 1001, 0}, {1001, 1, 0}, {300, 301, 0}};
    for (const Shape s : shapes) {
      for (bool per_row : {true, false}) {
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
          const std::string name = std::string(per_row ? "row_" : "col_") + std::string(name_of(op));
          const std::string lbl =
              std::to_string(s.rows) + "x" + std::to_string(s.cols) + (s.pad ? " ld+" + std::to_string(s.pad) : "");
          CheckCase c{"reduce", name, "-", dt, lbl, {}};
          c.run = [c, t, s, per_row, op, o](Backend& be, Backend& ref, std::uint64_t seed) {
            auto rng = case_rng(seed, c);
            const std::int64_t ld = s.cols + s.pad;
            const std::size_t span = static_cast<std::size_t>((s.rows - 1) * ld + s.cols);
            const Host x = values_for(rng, t, span, o.non_finite);
            const std::size_t n_out = static_cast<std::size_t>(per_row ? s.rows : s.cols);
            CaseResult r = result_for(c, be);
            Output got = make_output(be, t, n_out);
            Buffer want(ref, oracle_type(t), n_out);
            if (per_row) {
              reduce_rows(op, matrix(upload(be, t, x), s.rows, s.cols, ld), got.inner);
              reduce_rows(op, matrix(upload(ref, oracle_type(t), x), s.rows, s.cols, ld), want);
            } else {
              reduce_cols(op, matrix(upload(be, t, x), s.rows, s.cols, ld), got.inner);
              reduce_cols(op, matrix(upload(ref, oracle_type(t), x), s.rows, s.cols, ld), want);
            }
            const Host e = download(want);
            Host bound(n_out, 0.0);
            if (op == ReduceOp::sum && !integer(t)) {
              for (std::size_t i = 0; i < n_out; ++i) {
                double abs_sum = 0;
                const std::int64_t len = per_row ? s.cols : s.rows;
                for (std::int64_t j = 0; j < len; ++j) {
                  abs_sum += std::fabs(per_row ? x[static_cast<std::size_t>(i * ld + j)]
                                               : x[static_cast<std::size_t>(j * ld + i)]);
                }
                const double terms = static_cast<double>(len);
                bound[i] = (gamma(terms, u_of(t)) + gamma(terms, u64())) * abs_sum + u_of(t) * std::fabs(e[i]);
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
}

void add_scan_cases(std::vector<CheckCase>& out, const Backend& backend, const CheckOptions& o) {
  std::vector<std::size_t> sizes = vector_sizes(o.quick);
  sizes.push_back(300007);  // several parallel super-blocks
  for (DType t : {DType::f32, DType::f64, DType::i32}) {
    for (std::size_t n : sizes) {
      for (ScanKind kind : {ScanKind::inclusive, ScanKind::exclusive}) {
        for (bool in_place : {false, true}) {
          if (in_place && n != 1001 && n != 300007) continue;
          for (const ScanVariant variant : or_default(backend.scan_variants())) {
            const std::string name = std::string(kind == ScanKind::inclusive ? "inclusive_scan" : "exclusive_scan") +
                                     (in_place ? " in-place" : "");
            CheckCase c{"scan", name, tier_label(variant), std::string(name_of(t)), std::to_string(n), {}};
            c.run = [c, t, n, kind, in_place, o, variant](Backend& be, Backend& ref, std::uint64_t seed) {
              auto rng = case_rng(seed, c);
              const Host x = integer(t) ? random_values(rng, t, n, -1000, 1000) : values_for(rng, t, n, o.non_finite);
              CaseResult r = result_for(c, be);
              Output got = make_output(be, t, n, in_place ? &x : nullptr);
              const Buffer input = in_place ? got.inner : upload(be, t, x);
              kind == ScanKind::inclusive ? inclusive_scan(input, got.inner, {}, variant)
                                          : exclusive_scan(input, got.inner, {}, variant);
              Buffer want(ref, oracle_type(t), n);
              const Buffer xr = upload(ref, oracle_type(t), x);
              kind == ScanKind::inclusive ? inclusive_scan(xr, want) : exclusive_scan(xr, want);
              const Host e = download(want);
              Host bound(n, 0.0);
              if (!integer(t)) {
                double abs_prefix = 0;
                for (std::size_t i = 0; i < n; ++i) {
                  const std::size_t terms = kind == ScanKind::inclusive ? i + 1 : i;
                  if (kind == ScanKind::inclusive) abs_prefix += std::fabs(x[i]);
                  const double m = static_cast<double>(terms);
                  bound[i] = (gamma(m, u_of(t)) + gamma(m, u64())) * abs_prefix + u_of(t) * std::fabs(e[i]);
                  if (kind == ScanKind::exclusive) abs_prefix += std::fabs(x[i]);
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
  }
}

void add_ml_cases(std::vector<CheckCase>& out, const Backend&, const CheckOptions& o) {
  struct Shape {
    std::int64_t rows, cols;
  };
  const std::vector<Shape> shapes =
      o.quick ? std::vector<Shape>{{1, 1}, {33, 10}, {1000, 10}}
              : std::vector<Shape>{{1, 1}, {2, 3}, {31, 10}, {32, 32}, {33, 33}, {1000, 10}, {64, 1001}};
  for (DType t : {DType::f32, DType::f64}) {
    const std::string dt(name_of(t));
    for (const Shape s : shapes) {
      const std::string lbl = std::to_string(s.rows) + "x" + std::to_string(s.cols);
      CheckCase c{"ml", "softmax_cross_entropy", "-", dt, lbl, {}};
      c.run = [c, t, s, o](Backend& be, Backend& ref, std::uint64_t seed) {
        auto rng = case_rng(seed, c);
        const std::size_t n = static_cast<std::size_t>(s.rows * s.cols);
        Host x = random_values(rng, t, n, -30, 30);  // wide logits: the max subtraction matters
        if (o.non_finite) plant_non_finite(rng, x);
        Host labels =
            random_values(rng, DType::i32, static_cast<std::size_t>(s.rows), 0, static_cast<double>(s.cols - 1));
        if (s.rows > 2) {
          // Out of range: the op refuses them (unit tests); trusted, the kernels must give NaN.
          labels[0] = -1;
          labels[1] = static_cast<double>(s.cols);
        }
        CaseResult r = result_for(c, be);
        // probs and losses share one guarded output: probs first, then losses.
        Output got = make_output(be, t, n + static_cast<std::size_t>(s.rows));
        Matrix gp = matrix(got.inner.slice(0, n), s.rows, s.cols);
        Buffer gl = got.inner.slice(n, static_cast<std::size_t>(s.rows));
        softmax_cross_entropy(matrix(upload(be, t, x), s.rows, s.cols), upload(be, DType::i32, labels), gp, gl, {},
                              LabelCheck::trusted);
        Buffer want(ref, DType::f64, n + static_cast<std::size_t>(s.rows));
        Matrix wp = matrix(want.slice(0, n), s.rows, s.cols);
        Buffer wl = want.slice(n, static_cast<std::size_t>(s.rows));
        softmax_cross_entropy(matrix(upload(ref, DType::f64, x), s.rows, s.cols), upload(ref, DType::i32, labels), wp,
                              wl, {}, LabelCheck::trusted);
        const Host e = download(want);
        Host bound(e.size(), 0.0);
        const double u = u_of(t);
        for (std::int64_t row = 0; row < s.rows; ++row) {
          double m = -INFINITY;
          for (std::int64_t j = 0; j < s.cols; ++j) m = std::max(m, x[row * s.cols + j]);
          // max |x - m| over finite logits: the rounding of x - m is amplified by exp. A -Inf logit
          // gives an exact 0; a +Inf or NaN one makes the whole row NaN, compared as such.
          double spread = 0;
          for (std::int64_t j = 0; j < s.cols; ++j) {
            const double d = std::fabs(x[row * s.cols + j] - m);
            if (std::isfinite(d)) spread = std::max(spread, d);
          }
          const double rel = gamma(static_cast<double>(s.cols + 6), u) + 2 * u * spread;
          for (std::int64_t j = 0; j < s.cols; ++j) bound[row * s.cols + j] = rel * std::fabs(e[row * s.cols + j]);
          const double loss = e[n + row];
          bound[n + row] = rel + 2 * u * (spread + std::fabs(loss)) + u * std::fabs(loss);
        }
        finish(r, got, e, bound);
        return r;
      };
      out.push_back(std::move(c));
    }
    for (std::size_t n : vector_sizes(o.quick)) {
      if (n == 0) continue;
      CheckCase c{"ml", "mse", "-", dt, std::to_string(n), {}};
      c.run = [c, t, n, o](Backend& be, Backend& ref, std::uint64_t seed) {
        auto rng = case_rng(seed, c);
        Host a = random_values(rng, t, n), b = random_values(rng, t, n);
        if (o.non_finite) plant_non_finite(rng, a);
        CaseResult r = result_for(c, be);
        Output got = make_output(be, t, 1);
        mse(upload(be, t, a), upload(be, t, b), got.inner);
        Buffer want(ref, DType::f64, 1);
        mse(upload(ref, DType::f64, a), upload(ref, DType::f64, b), want);
        const Host e = download(want);
        const double nn = static_cast<double>(n) + 4;
        finish(r, got, e, Host{(gamma(nn, u_of(t)) + gamma(nn, u64())) * std::fabs(e[0])});
        return r;
      };
      out.push_back(std::move(c));
    }
  }
}

}  // namespace tandem::verify::detail
