// Cases for the elementwise family and the small matrix ops (bias add, matrix add, transpose).
#include <cmath>

#include "cases.hpp"

namespace tandem::verify::detail {

namespace {

std::string size_label(std::size_t n) { return std::to_string(n); }

// Conversions from t to every other floating type; the reference's rounding is the spec (to
// nearest even; exact when widening), so the bound is zero.
void add_convert_cases(std::vector<CheckCase>& out, DType t, std::size_t n, const CheckOptions& o) {
  const std::string dt(name_of(t));
  for (DType to : {DType::f16, DType::bf16, DType::f32, DType::f64}) {
    if (to == t) continue;
    CheckCase c{"elementwise", "convert", "-", dt + "->" + std::string(name_of(to)), size_label(n), {}};
    c.run = [c, t, to, n, o](Backend& be, Backend& ref, std::uint64_t seed) {
      auto rng = case_rng(seed, c);
      // Values past f16's range and below its normal range too, so overflow and subnormals show.
      Host x = random_values(rng, t, n, -7e4, 7e4);
      for (std::size_t i = 0; i < n; i += 3) x[i] *= 1e-9;
      if (o.non_finite) plant_non_finite(rng, x);
      CaseResult r = result_for(c, be);
      Output got = make_output(be, to, n);
      convert(upload(be, t, x), got.inner);
      Output want = make_output(ref, to, n);
      convert(upload(ref, t, x), want.inner);
      finish(r, got, download(want.inner), Host(n, 0.0));
      return r;
    };
    out.push_back(std::move(c));
  }
}

// Values for the ops that move elements without arithmetic: small integers for i32.
Host moved_values(std::mt19937_64& rng, DType t, std::size_t n) {
  return random_values(rng, t, n, t == DType::i32 ? -1000 : -1, t == DType::i32 ? 1000 : 1);
}

// x op y against the f64 reference, with the op's bound per element.
CheckCase binary_case(DType t, std::size_t n, BinaryOp op, const CheckOptions& o) {
  CheckCase c{"elementwise", std::string(name_of(op)), "-", std::string(name_of(t)), size_label(n), {}};
  c.run = [c, t, n, op, o](Backend& be, Backend& ref, std::uint64_t seed) {
    auto rng = case_rng(seed, c);
    Host x = random_values(rng, t, n), y = random_values(rng, t, n);
    if (o.non_finite) {
      plant_non_finite(rng, x);
      plant_non_finite(rng, y);
    }
    CaseResult r = result_for(c, be);
    Output got = make_output(be, t, n);
    binary(op, upload(be, t, x), upload(be, t, y), got.inner);
    Buffer want(ref, DType::f64, n);
    binary(op, upload(ref, DType::f64, x), upload(ref, DType::f64, y), want);
    const Host e = download(want);
    Host bound(n);
    const double u = u_of(t);
    for (std::size_t i = 0; i < n; ++i) bound[i] = binary_bound(op, x[i], y[i], e[i], u);
    finish(r, got, e, bound);
    return r;
  };
  return c;
}

// op(x) over the op's domain against the f64 reference.
CheckCase unary_case(DType t, std::size_t n, UnaryOp op, const CheckOptions& o) {
  CheckCase c{"elementwise", std::string(name_of(op)), "-", std::string(name_of(t)), size_label(n), {}};
  c.run = [c, t, n, op, o](Backend& be, Backend& ref, std::uint64_t seed) {
    auto rng = case_rng(seed, c);
    const auto [lo, hi] = unary_domain(op);
    Host x = random_values(rng, t, n, lo, hi);
    if (o.non_finite) plant_non_finite(rng, x);
    CaseResult r = result_for(c, be);
    Output got = make_output(be, t, n);
    unary(op, upload(be, t, x), got.inner);
    Buffer want(ref, DType::f64, n);
    unary(op, upload(ref, DType::f64, x), want);
    const Host e = download(want);
    Host bound(n);
    for (std::size_t i = 0; i < n; ++i) bound[i] = unary_bound(op, e[i], u_of(t));
    finish(r, got, e, bound);
    return r;
  };
  return c;
}

// y += alpha x.
CheckCase axpy_case(DType t, std::size_t n, const CheckOptions& o) {
  CheckCase c{"elementwise", "axpy", "-", std::string(name_of(t)), size_label(n), {}};
  c.run = [c, t, n, o](Backend& be, Backend& ref, std::uint64_t seed) {
    auto rng = case_rng(seed, c);
    Host x = random_values(rng, t, n), y = random_values(rng, t, n);
    if (o.non_finite) plant_non_finite(rng, x);
    const double alpha = -1.75;
    CaseResult r = result_for(c, be);
    Output got = make_output(be, t, n, &y);
    axpy(alpha, upload(be, t, x), got.inner);
    Buffer want = upload(ref, DType::f64, y);
    axpy(alpha, upload(ref, DType::f64, x), want);
    Host bound(n);
    for (std::size_t i = 0; i < n; ++i) bound[i] = gamma(3, u_of(t)) * (std::fabs(alpha * x[i]) + std::fabs(y[i]));
    finish(r, got, download(want), bound);
    return r;
  };
  return c;
}

// out = alpha x.
CheckCase scale_case(DType t, std::size_t n, const CheckOptions& o) {
  CheckCase c{"elementwise", "scale", "-", std::string(name_of(t)), size_label(n), {}};
  c.run = [c, t, n, o](Backend& be, Backend& ref, std::uint64_t seed) {
    auto rng = case_rng(seed, c);
    Host x = random_values(rng, t, n);
    if (o.non_finite) plant_non_finite(rng, x);
    const double alpha = 0.3;  // not exact in binary: its rounding is part of the bound
    CaseResult r = result_for(c, be);
    Output got = make_output(be, t, n);
    scale(alpha, upload(be, t, x), got.inner);
    Buffer want(ref, DType::f64, n);
    scale(alpha, upload(ref, DType::f64, x), want);
    const Host e = download(want);
    Host bound(n);
    for (std::size_t i = 0; i < n; ++i) bound[i] = gamma(2, u_of(t)) * std::fabs(e[i]);
    finish(r, got, e, bound);
    return r;
  };
  return c;
}

// fill: every element the value as the dtype stores it.
CheckCase fill_case(DType t, std::size_t n) {
  CheckCase f{"elementwise", "fill", "-", std::string(name_of(t)), size_label(n), {}};
  f.run = [f, t, n](Backend& be, Backend&, std::uint64_t) {
    CaseResult r = result_for(f, be);
    const double value = t == DType::i32 ? -7 : 0.1;
    Output got = make_output(be, t, n);
    fill(got.inner, value);
    const double stored = download(upload(be, t, Host{value}))[0];
    finish(r, got, Host(n, stored), Host(n, 0.0));
    return r;
  };
  return f;
}

// copy: the bits unchanged.
CheckCase copy_case(DType t, std::size_t n, const CheckOptions& o) {
  CheckCase c{"elementwise", "copy", "-", std::string(name_of(t)), size_label(n), {}};
  c.run = [c, t, n, o](Backend& be, Backend&, std::uint64_t seed) {
    auto rng = case_rng(seed, c);
    Host x = moved_values(rng, t, n);
    if (o.non_finite && t != DType::i32) plant_non_finite(rng, x);
    CaseResult r = result_for(c, be);
    Output got = make_output(be, t, n);
    copy(upload(be, t, x), got.inner);
    finish(r, got, x, Host(n, 0.0));
    return r;
  };
  return c;
}

// A matrix case's shape: (rows, cols) with ld = cols + pad.
struct Shape {
  std::int64_t rows, cols, pad;
  std::int64_t ld() const { return cols + pad; }
  std::size_t span() const { return rows == 0 ? 0 : static_cast<std::size_t>((rows - 1) * ld() + cols); }
  std::string label() const {
    return std::to_string(rows) + "x" + std::to_string(cols) + (pad ? " ld+" + std::to_string(pad) : "");
  }
};

// x + the row vector b in every row; the padding stays untouched.
CheckCase add_row_vector_case(DType t, Shape s, const CheckOptions& o) {
  CheckCase bias{"matrix", "add_row_vector", "-", std::string(name_of(t)), s.label(), {}};
  bias.run = [bias, t, s, ld = s.ld(), span = s.span(), o](Backend& be, Backend& ref, std::uint64_t seed) {
    auto rng = case_rng(seed, bias);
    Host x = random_values(rng, t, span), b = random_values(rng, t, static_cast<std::size_t>(s.cols));
    if (o.non_finite) plant_non_finite(rng, x);
    CaseResult r = result_for(bias, be);
    Output got = make_output(be, t, span);
    Matrix gm = matrix(got.inner, s.rows, s.cols, ld);
    add_row_vector(matrix(upload(be, t, x), s.rows, s.cols, ld), upload(be, t, b), gm);
    Buffer want(ref, DType::f64, span);
    Matrix wm = matrix(want, s.rows, s.cols, ld);
    ref.fill(Queue{}, DType::f64, span, std::nan(""), want.data());  // the padding stays NaN, as on `got`
    add_row_vector(matrix(upload(ref, DType::f64, x), s.rows, s.cols, ld), upload(ref, DType::f64, b), wm);
    const Host e = download(want);
    Host bound(span);
    for (std::size_t i = 0; i < span; ++i) bound[i] = (u_of(t) + u64()) * std::fabs(e[i]);
    finish(r, got, e, bound);
    return r;
  };
  return bias;
}

// The fused epilogue act(x + b) of one activation: relu and those whose derivative reads the
// input (gelu, silu) also write z = x + b in place over x, the others do not.
CheckCase bias_activation_case(DType t, Shape s, UnaryOp act, const CheckOptions& o) {
  CheckCase ba{"matrix", "bias_" + std::string(name_of(act)), "-", std::string(name_of(t)), s.label(), {}};
  ba.run = [ba, t, s, ld = s.ld(), span = s.span(), o, act](Backend& be, Backend& ref, std::uint64_t seed) {
    auto rng = case_rng(seed, ba);
    Host x = random_values(rng, t, span, -3, 3), b = random_values(rng, t, static_cast<std::size_t>(s.cols));
    if (o.non_finite) plant_non_finite(rng, x);
    const bool with_z = act == UnaryOp::relu || grad_from(act) == GradFrom::input;
    CaseResult r = result_for(ba, be);
    Output got = make_output(be, t, span);
    Matrix gm = matrix(got.inner, s.rows, s.cols, ld);
    Matrix gx = matrix(upload(be, t, x), s.rows, s.cols, ld);
    bias_activation(gx, upload(be, t, b), act, gm, with_z ? &gx : nullptr);
    Buffer want(ref, DType::f64, span), want_z(ref, DType::f64, span);
    ref.fill(Queue{}, DType::f64, span, std::nan(""), want.data());
    Matrix wm = matrix(want, s.rows, s.cols, ld);
    // The reference: z rounded to the tested type first, as every backend computes it.
    Host z_rounded(span);
    for (std::size_t i = 0; i < span; ++i) {
      const std::size_t col = i % static_cast<std::size_t>(ld);  // past s.cols: padding, untouched
      z_rounded[i] = col < static_cast<std::size_t>(s.cols) ? round_to(t, x[i] + b[col]) : x[i];
    }
    Matrix zm = matrix(upload(ref, DType::f64, z_rounded), s.rows, s.cols, ld);
    Buffer zero(ref, DType::f64, static_cast<std::size_t>(s.cols));
    zero.fill(0);
    bias_activation(zm, zero, act, wm);
    const Host e = download(want);
    Host bound(span);
    for (std::size_t i = 0; i < span; ++i) bound[i] = unary_factor(act) * u_of(t) * std::fabs(e[i]) + u64();
    finish(r, got, e, bound);
    // z: exactly x + bias rounded once, where it was asked for.
    if (with_z && r.comparison.ok() && s.rows > 0) {
      const Host zg = download(gx.buffer);
      for (std::size_t i = 0; i < span; ++i) {
        if (i % static_cast<std::size_t>(ld) >= static_cast<std::size_t>(s.cols)) continue;
        const bool same = zg[i] == z_rounded[i] || (std::isnan(zg[i]) && std::isnan(z_rounded[i]));
        if (!same) {
          r.error = "z[" + std::to_string(i) + "] is " + std::to_string(zg[i]) + ", x + bias is " +
                    std::to_string(z_rounded[i]);
          break;
        }
      }
    }
    return r;
  };
  return ba;
}

// alpha a + beta b.
CheckCase matrix_add_case(DType t, Shape s, const CheckOptions& o) {
  CheckCase add{"matrix", "matrix_add", "-", std::string(name_of(t)), s.label(), {}};
  add.run = [add, t, s, ld = s.ld(), span = s.span(), o](Backend& be, Backend& ref, std::uint64_t seed) {
    auto rng = case_rng(seed, add);
    Host a = random_values(rng, t, span), b = random_values(rng, t, span);
    if (o.non_finite) plant_non_finite(rng, b);
    const double alpha = 0.5, beta = -2.25;
    CaseResult r = result_for(add, be);
    Output got = make_output(be, t, span);
    Matrix gm = matrix(got.inner, s.rows, s.cols, ld);
    matrix_add(alpha, matrix(upload(be, t, a), s.rows, s.cols, ld), beta, matrix(upload(be, t, b), s.rows, s.cols, ld), gm);
    Buffer want(ref, DType::f64, span);
    ref.fill(Queue{}, DType::f64, span, std::nan(""), want.data());
    Matrix wm = matrix(want, s.rows, s.cols, ld);
    matrix_add(alpha, matrix(upload(ref, DType::f64, a), s.rows, s.cols, ld), beta,
               matrix(upload(ref, DType::f64, b), s.rows, s.cols, ld), wm);
    Host bound(span);
    for (std::size_t i = 0; i < span; ++i) bound[i] = gamma(3, u_of(t)) * (std::fabs(alpha * a[i]) + std::fabs(beta * b[i]));
    finish(r, got, download(want), bound);
    return r;
  };
  return add;
}

// out has s.rows rows drawn from x's rows (repeats allowed), a few indices out of range.
CheckCase gather_rows_case(DType t, Shape s) {
  CheckCase ga{"matrix", "gather_rows", "-", std::string(name_of(t)), s.label(), {}};
  ga.run = [ga, t, s, ld = s.ld(), span = s.span()](Backend& be, Backend& ref, std::uint64_t seed) {
    auto rng = case_rng(seed, ga);
    Host x = moved_values(rng, t, span);
    std::vector<std::int32_t> index(static_cast<std::size_t>(s.rows));
    std::uniform_int_distribution<std::int32_t> pick(-2, static_cast<std::int32_t>(s.rows) + 1);
    for (auto& i : index) i = pick(rng);
    CaseResult r = result_for(ga, be);
    const Shape o{s.rows, s.cols, 1};  // out's ld is not x's
    const std::int64_t ldo = o.ld();
    const std::size_t out_span = o.span();
    Output got = make_output(be, t, out_span);
    Matrix gm = matrix(got.inner, s.rows, s.cols, ldo);
    gather_rows(matrix(upload(be, t, x), s.rows, s.cols, ld), Buffer::from(be, index), gm);
    const DType rt = t == DType::i32 ? DType::i32 : DType::f64;
    Output want = make_output(ref, rt, out_span);
    Matrix wm = matrix(want.inner, s.rows, s.cols, ldo);
    gather_rows(matrix(upload(ref, rt, x), s.rows, s.cols, ld), Buffer::from(ref, index), wm);
    finish(r, got, download(want.inner), Host(out_span, 0.0));
    return r;
  };
  return ga;
}

// out = a^T, with ld = rows + 1 so that a wrong leading dimension shows.
CheckCase transpose_case(DType t, Shape s) {
  CheckCase tr{"matrix", "transpose", "-", std::string(name_of(t)), s.label(), {}};
  tr.run = [tr, t, s, ld = s.ld(), span = s.span()](Backend& be, Backend& ref, std::uint64_t seed) {
    auto rng = case_rng(seed, tr);
    Host a = moved_values(rng, t, span);
    CaseResult r = result_for(tr, be);
    const Shape o{s.cols, s.rows, 1};
    const std::int64_t ldo = o.ld();
    const std::size_t out_span = o.span();
    Output got = make_output(be, t, out_span);
    Matrix gm = matrix(got.inner, s.cols, s.rows, ldo);
    transpose(matrix(upload(be, t, a), s.rows, s.cols, ld), gm);
    const DType rt = t == DType::i32 ? DType::i32 : DType::f64;
    Output want = make_output(ref, rt, out_span);
    Matrix wm = matrix(want.inner, s.cols, s.rows, ldo);
    transpose(matrix(upload(ref, rt, a), s.rows, s.cols, ld), wm);
    finish(r, got, download(want.inner), Host(out_span, 0.0));
    return r;
  };
  return tr;
}

}  // namespace

void add_elementwise_cases(std::vector<CheckCase>& out, const Backend&, const CheckOptions& o) {
  for (DType t : {DType::f16, DType::bf16, DType::f32, DType::f64}) {
    for (std::size_t n : vector_sizes(o.quick)) add_convert_cases(out, t, n, o);
  }
  for (DType t : {DType::f32, DType::f64}) {
    for (std::size_t n : vector_sizes(o.quick)) {
      for (BinaryOp op : kBinaryOps) out.push_back(binary_case(t, n, op, o));
      for (UnaryOp op : kUnaryOps) out.push_back(unary_case(t, n, op, o));
      out.push_back(axpy_case(t, n, o));
      out.push_back(scale_case(t, n, o));
    }
  }
  // fill and copy for every dtype (they move bits, no arithmetic).
  for (DType t : {DType::f16, DType::bf16, DType::f32, DType::f64, DType::i32}) {
    for (std::size_t n : vector_sizes(o.quick)) {
      out.push_back(fill_case(t, n));
      out.push_back(copy_case(t, n, o));
    }
  }
}

void add_matrix_cases(std::vector<CheckCase>& out, const Backend&, const CheckOptions& o) {
  std::vector<Shape> shapes = {{0, 0, 0}, {1, 1, 0}, {2, 3, 0}, {31, 33, 0}, {32, 32, 0}, {33, 31, 5}, {100, 257, 3}, {300, 1001, 0}};
  if (o.quick) shapes = {{0, 0, 0}, {1, 1, 0}, {33, 31, 5}, {300, 1001, 0}};
  for (const Shape s : shapes) {
    for (DType t : {DType::f32, DType::f64}) {
      out.push_back(add_row_vector_case(t, s, o));
      for (UnaryOp act : kActivations) out.push_back(bias_activation_case(t, s, act, o));
      out.push_back(matrix_add_case(t, s, o));
    }
    for (DType t : {DType::f32, DType::f64, DType::i32, DType::f16}) out.push_back(gather_rows_case(t, s));
    for (DType t : {DType::f32, DType::f64, DType::i32, DType::bf16}) out.push_back(transpose_case(t, s));
  }
}

}  // namespace tandem::verify::detail
