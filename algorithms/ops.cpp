// The public ops: argument checks, then one call into the owning backend.
#include "tandem/ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>

#include "checks.hpp"
#include "tandem/errors.hpp"
#include "tandem/profile.hpp"

namespace tandem {

using checks::backend_of;
using checks::dtype_in;
using checks::matrix_fits;
using checks::same_backend;
using checks::same_dtype;
using checks::same_size;

namespace {

constexpr auto kFloat = {DType::f32, DType::f64};

// Descriptions of operands for the profile (built only when profiling), by appending (GCC 12's
// -Wrestrict misfires on chains of operator+ over temporaries).
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string s;
  for (std::string_view p : parts) s.append(p);
  return s;
}
std::string vec(const Buffer& b) { return cat({name_of(b.dtype()), "[", std::to_string(b.size()), "]"}); }
std::string mat(const Matrix& m) {
  return cat({name_of(m.buffer.dtype()), "(", std::to_string(m.rows), ", ", std::to_string(m.cols), ")"});
}
std::size_t mat_bytes(const Matrix& m) { return static_cast<std::size_t>(m.rows * m.cols) * size_of(m.buffer.dtype()); }
std::string gemm(const GemmArgs& g) {
  return cat({std::to_string(g.m), "x", std::to_string(g.n), "x", std::to_string(g.k), " ", name_of(g.ab_type),
              g.trans_a == Transpose::yes ? " A^T" : "", g.trans_b == Transpose::yes ? " B^T" : "", " ",
              name_of(g.tier)});
}
constexpr auto kConvertible = {DType::f16, DType::bf16, DType::f32, DType::f64};

std::string op_name(std::string_view prefix, std::string_view name) { return std::string(prefix) + std::string(name); }

// Scales (or, with beta == 0, zeroes without reading) the (rows, cols) matrix c.
void scale_matrix(Backend& be, Queue q, const Matrix& c, double beta) {
  Buffer buffer = c.buffer;
  auto run = [&](std::size_t offset, std::size_t count) {
    void* ptr = static_cast<char*>(buffer.data()) + offset * size_of(c.buffer.dtype());
    if (beta == 0) {
      be.fill(q, c.buffer.dtype(), count, 0.0, ptr);
    } else if (beta != 1) {
      be.scale(q, c.buffer.dtype(), count, beta, ptr, ptr);
    }
  };
  if (c.ld == c.cols) {
    run(0, static_cast<std::size_t>(c.rows * c.cols));
  } else {
    for (std::int64_t r = 0; r < c.rows; ++r) run(static_cast<std::size_t>(r * c.ld), static_cast<std::size_t>(c.cols));
  }
}

}  // namespace

Matrix matrix(Buffer buffer, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  Matrix m{std::move(buffer), rows, cols, ld == 0 ? std::max<std::int64_t>(cols, 1) : ld};
  matrix_fits(m, "matrix", "buffer");
  return m;
}

void binary(BinaryOp op, const Buffer& x, const Buffer& y, Buffer out, Queue q) {
  const std::string name = op_name("", name_of(op));
  Backend& be = backend_of(x, name.c_str(), "x");
  same_backend(be, y, name.c_str(), "y");
  same_backend(be, out, name.c_str(), "out");
  dtype_in(x.dtype(), kFloat, name.c_str(), "x");
  same_dtype(x.dtype(), y, name.c_str(), "y");
  same_dtype(x.dtype(), out, name.c_str(), "out");
  same_size(x.size(), y, name.c_str(), "y");
  same_size(x.size(), out, name.c_str(), "out");
  checks::same_or_disjoint(out, x, name.c_str(), "out", "x");
  checks::same_or_disjoint(out, y, name.c_str(), "out", "y");
  if (x.size() == 0) return;
  profile::OpTimer timer(be, q, "binary");
  if (timer.on()) timer.set(cat({name_of(op), " ", vec(x)}), 3 * x.bytes());
  be.binary(q, op, x.dtype(), x.size(), x.data(), y.data(), out.data());
}

void unary(UnaryOp op, const Buffer& x, Buffer out, Queue q) {
  const std::string name = op_name("", name_of(op));
  Backend& be = backend_of(x, name.c_str(), "x");
  same_backend(be, out, name.c_str(), "out");
  dtype_in(x.dtype(), kFloat, name.c_str(), "x");
  same_dtype(x.dtype(), out, name.c_str(), "out");
  same_size(x.size(), out, name.c_str(), "out");
  checks::same_or_disjoint(out, x, name.c_str(), "out", "x");
  if (x.size() == 0) return;
  profile::OpTimer timer(be, q, "unary");
  if (timer.on()) timer.set(cat({name_of(op), " ", vec(x)}), 2 * x.bytes());
  be.unary(q, op, x.dtype(), x.size(), x.data(), out.data());
}

void axpy(double alpha, const Buffer& x, Buffer y, Queue q) {
  Backend& be = backend_of(x, "axpy", "x");
  same_backend(be, y, "axpy", "y");
  dtype_in(x.dtype(), kFloat, "axpy", "x");
  same_dtype(x.dtype(), y, "axpy", "y");
  same_size(x.size(), y, "axpy", "y");
  checks::same_or_disjoint(y, x, "axpy", "y", "x");
  if (x.size() == 0) return;
  profile::OpTimer timer(be, q, "axpy");
  if (timer.on()) timer.set(vec(x), 3 * x.bytes());
  be.axpy(q, x.dtype(), x.size(), alpha, x.data(), y.data());
}

void scale(double alpha, const Buffer& x, Buffer out, Queue q) {
  Backend& be = backend_of(x, "scale", "x");
  same_backend(be, out, "scale", "out");
  dtype_in(x.dtype(), kFloat, "scale", "x");
  same_dtype(x.dtype(), out, "scale", "out");
  same_size(x.size(), out, "scale", "out");
  checks::same_or_disjoint(out, x, "scale", "out", "x");
  if (x.size() == 0) return;
  profile::OpTimer timer(be, q, "scale");
  if (timer.on()) timer.set(vec(x), 2 * x.bytes());
  be.scale(q, x.dtype(), x.size(), alpha, x.data(), out.data());
}

void fill(Buffer out, double value, Queue q) {
  Backend& be = backend_of(out, "fill", "out");
  if (out.dtype() == DType::i32 && !(value >= INT32_MIN && value <= INT32_MAX)) {
    throw InvalidArgument("fill: " + std::to_string(value) + " does not fit an i32 buffer (finite, within +-2^31)");
  }
  if (out.size() == 0) return;
  profile::OpTimer timer(be, q, "fill");
  if (timer.on()) timer.set(vec(out), out.bytes());
  be.fill(q, out.dtype(), out.size(), value, out.data());
}

void copy(const Buffer& src, Buffer dst, Queue q) {
  Backend& be = backend_of(src, "copy", "src");
  same_backend(be, dst, "copy", "dst");
  same_dtype(src.dtype(), dst, "copy", "dst");
  same_size(src.size(), dst, "copy", "dst");
  if (src.size() == 0) return;
  profile::OpTimer timer(be, q, "copy");
  if (timer.on()) timer.set(vec(src), 2 * src.bytes());
  be.copy_on_device(q, dst.data(), src.data(), src.bytes());
}

void add_row_vector(const Matrix& x, const Buffer& bias, Matrix out, Queue q) {
  matrix_fits(x, "add_row_vector", "x");
  matrix_fits(out, "add_row_vector", "out");
  Backend& be = x.buffer.backend();
  same_backend(be, bias, "add_row_vector", "bias");
  same_backend(be, out.buffer, "add_row_vector", "out");
  dtype_in(x.buffer.dtype(), kFloat, "add_row_vector", "x");
  same_dtype(x.buffer.dtype(), bias, "add_row_vector", "bias");
  same_dtype(x.buffer.dtype(), out.buffer, "add_row_vector", "out");
  same_size(static_cast<std::size_t>(x.cols), bias, "add_row_vector", "bias");
  if (out.rows != x.rows || out.cols != x.cols) {
    throw ShapeMismatch("add_row_vector: out is (" + std::to_string(out.rows) + ", " + std::to_string(out.cols) +
                        "), x is (" + std::to_string(x.rows) + ", " + std::to_string(x.cols) + ")");
  }
  if (x.rows == 0 || x.cols == 0) return;
  if (x.buffer.data() != out.buffer.data() || x.ld != out.ld)
    checks::no_overlap(out.buffer, x.buffer, "add_row_vector", "out", "x");
  checks::no_overlap(out.buffer, bias, "add_row_vector", "out", "bias");
  profile::OpTimer timer(be, q, "add_row_vector");
  if (timer.on()) timer.set(mat(x), 2 * mat_bytes(x) + bias.bytes());
  be.add_row_vector(q, x.buffer.dtype(), x.rows, x.cols, x.buffer.data(), x.ld, bias.data(), out.buffer.data(), out.ld);
}

void bias_activation(const Matrix& x, const Buffer& bias, UnaryOp act, Matrix out, Matrix* z, Queue q) {
  matrix_fits(x, "bias_activation", "x");
  matrix_fits(out, "bias_activation", "out");
  Backend& be = x.buffer.backend();
  same_backend(be, bias, "bias_activation", "bias");
  same_backend(be, out.buffer, "bias_activation", "out");
  dtype_in(x.buffer.dtype(), kFloat, "bias_activation", "x");
  same_dtype(x.buffer.dtype(), bias, "bias_activation", "bias");
  same_dtype(x.buffer.dtype(), out.buffer, "bias_activation", "out");
  same_size(static_cast<std::size_t>(x.cols), bias, "bias_activation", "bias");
  if (!is_activation(act)) {
    throw InvalidArgument("bias_activation: " + std::string(name_of(act)) + " is not an activation (" +
                          activation_names() + ")");
  }
  auto same_shape = [&](const Matrix& m, const char* role) {
    if (m.rows != x.rows || m.cols != x.cols) {
      throw ShapeMismatch(std::string("bias_activation: ") + role + " is (" + std::to_string(m.rows) + ", " +
                          std::to_string(m.cols) + "), x is (" + std::to_string(x.rows) + ", " +
                          std::to_string(x.cols) + ")");
    }
  };
  same_shape(out, "out");
  if (z != nullptr) {
    matrix_fits(*z, "bias_activation", "z");
    same_backend(be, z->buffer, "bias_activation", "z");
    same_dtype(x.buffer.dtype(), z->buffer, "bias_activation", "z");
    same_shape(*z, "z");
    if (z->buffer.data() != x.buffer.data() || z->ld != x.ld)
      checks::no_overlap(z->buffer, x.buffer, "bias_activation", "z", "x");
    checks::no_overlap(out.buffer, z->buffer, "bias_activation", "out", "z");
    checks::no_overlap(z->buffer, bias, "bias_activation", "z", "bias");
  }
  if (x.rows == 0 || x.cols == 0) return;
  checks::no_overlap(out.buffer, x.buffer, "bias_activation", "out", "x");
  checks::no_overlap(out.buffer, bias, "bias_activation", "out", "bias");
  profile::OpTimer timer(be, q, "bias_activation");
  if (timer.on()) timer.set(cat({name_of(act), " ", mat(x)}), (z ? 3 : 2) * mat_bytes(x) + bias.bytes());
  be.bias_activation(q, x.buffer.dtype(), x.rows, x.cols, x.buffer.data(), x.ld, bias.data(), act,
                     z ? z->buffer.data() : nullptr, z ? z->ld : 0, out.buffer.data(), out.ld);
}

void gather_rows(const Matrix& x, const Buffer& index, Matrix out, Queue q) {
  matrix_fits(x, "gather_rows", "x");
  matrix_fits(out, "gather_rows", "out");
  Backend& be = x.buffer.backend();
  same_backend(be, index, "gather_rows", "index");
  same_backend(be, out.buffer, "gather_rows", "out");
  dtype_in(index.dtype(), {DType::i32}, "gather_rows", "index");
  same_dtype(x.buffer.dtype(), out.buffer, "gather_rows", "out");
  if (out.rows != static_cast<std::int64_t>(index.size()) || out.cols != x.cols) {
    std::string msg = "gather_rows: with ";
    msg += std::to_string(index.size()) + " indices and x of " + std::to_string(x.cols) + " columns, out must be (";
    msg += std::to_string(index.size()) + ", " + std::to_string(x.cols) + "), not (" + std::to_string(out.rows) + ", ";
    msg += std::to_string(out.cols) + ")";
    throw ShapeMismatch(msg);
  }
  if (out.rows == 0 || out.cols == 0) return;
  checks::no_overlap(out.buffer, x.buffer, "gather_rows", "out", "x");
  checks::no_overlap(out.buffer, index, "gather_rows", "out", "index");
  profile::OpTimer timer(be, q, "gather_rows");
  if (timer.on()) timer.set(cat({mat(out), " from ", mat(x)}), 2 * mat_bytes(out) + index.bytes());
  be.gather_rows(q, x.buffer.dtype(), out.rows, out.cols, static_cast<const std::int32_t*>(index.data()), x.rows,
                 x.buffer.data(), x.ld, out.buffer.data(), out.ld);
}

void convert(const Buffer& x, Buffer out, Queue q) {
  Backend& be = checks::backend_of(x, "convert", "x");
  same_backend(be, out, "convert", "out");
  dtype_in(x.dtype(), kConvertible, "convert", "x");
  dtype_in(out.dtype(), kConvertible, "convert", "out");
  same_size(x.size(), out, "convert", "out");
  if (x.size() == 0) return;
  if (x.dtype() == out.dtype()) {
    checks::same_or_disjoint(out, x, "convert", "out", "x");
    if (x.data() != out.data()) be.copy_on_device(q, out.data(), x.data(), x.bytes());
    return;
  }
  checks::no_overlap(out, x, "convert", "out", "x");
  profile::OpTimer timer(be, q, "convert");
  if (timer.on()) timer.set(cat({vec(x), " -> ", name_of(out.dtype())}), x.bytes() + out.bytes());
  be.convert(q, x.dtype(), out.dtype(), x.size(), x.data(), out.data());
}

void matrix_add(double alpha, const Matrix& a, double beta, const Matrix& b, Matrix c, Queue q) {
  matrix_fits(a, "matrix_add", "a");
  matrix_fits(b, "matrix_add", "b");
  matrix_fits(c, "matrix_add", "c");
  Backend& be = a.buffer.backend();
  same_backend(be, b.buffer, "matrix_add", "b");
  same_backend(be, c.buffer, "matrix_add", "c");
  dtype_in(a.buffer.dtype(), kFloat, "matrix_add", "a");
  same_dtype(a.buffer.dtype(), b.buffer, "matrix_add", "b");
  same_dtype(a.buffer.dtype(), c.buffer, "matrix_add", "c");
  if (b.rows != a.rows || b.cols != a.cols || c.rows != a.rows || c.cols != a.cols) {
    throw ShapeMismatch("matrix_add: a is (" + std::to_string(a.rows) + ", " + std::to_string(a.cols) + "), b is (" +
                        std::to_string(b.rows) + ", " + std::to_string(b.cols) + "), c is (" + std::to_string(c.rows) +
                        ", " + std::to_string(c.cols) + "); all must agree");
  }
  if (a.rows == 0 || a.cols == 0) return;
  if (a.buffer.data() != c.buffer.data() || a.ld != c.ld)
    checks::no_overlap(c.buffer, a.buffer, "matrix_add", "c", "a");
  if (b.buffer.data() != c.buffer.data() || b.ld != c.ld)
    checks::no_overlap(c.buffer, b.buffer, "matrix_add", "c", "b");
  profile::OpTimer timer(be, q, "matrix_add");
  if (timer.on()) timer.set(mat(a), 3 * mat_bytes(a));
  be.matrix_add(q, a.buffer.dtype(), a.rows, a.cols, alpha, a.buffer.data(), a.ld, beta, b.buffer.data(), b.ld,
                c.buffer.data(), c.ld);
}

void transpose(const Matrix& a, Matrix out, Queue q) {
  matrix_fits(a, "transpose", "a");
  matrix_fits(out, "transpose", "out");
  Backend& be = a.buffer.backend();
  same_backend(be, out.buffer, "transpose", "out");
  same_dtype(a.buffer.dtype(), out.buffer, "transpose", "out");
  if (out.rows != a.cols || out.cols != a.rows) {
    throw ShapeMismatch("transpose: a is (" + std::to_string(a.rows) + ", " + std::to_string(a.cols) +
                        "), so out must be (" + std::to_string(a.cols) + ", " + std::to_string(a.rows) + "), not (" +
                        std::to_string(out.rows) + ", " + std::to_string(out.cols) + ")");
  }
  checks::no_overlap(out.buffer, a.buffer, "transpose", "out", "a");
  if (a.rows == 0 || a.cols == 0) return;
  profile::OpTimer timer(be, q, "transpose");
  if (timer.on()) timer.set(mat(a), 2 * mat_bytes(a));
  be.transpose(q, a.buffer.dtype(), a.rows, a.cols, a.buffer.data(), a.ld, out.buffer.data(), out.ld);
}

namespace {

// Checks a matmul and fills GemmArgs (tier left as asked).
GemmArgs gemm_args(const Matrix& a, const Matrix& b, const Matrix& c, const MatmulOptions& o) {
  matrix_fits(a, "matmul", "a");
  matrix_fits(b, "matmul", "b");
  matrix_fits(c, "matmul", "c");
  Backend& be = a.buffer.backend();
  same_backend(be, b.buffer, "matmul", "b");
  same_backend(be, c.buffer, "matmul", "c");
  const DType ab = a.buffer.dtype();
  dtype_in(ab, {DType::f32, DType::f64, DType::f16, DType::bf16}, "matmul", "a");
  same_dtype(ab, b.buffer, "matmul", "b");
  const DType ct = (ab == DType::f16 || ab == DType::bf16) ? DType::f32 : ab;
  if (c.buffer.dtype() != ct) {
    throw DTypeMismatch("matmul: c has dtype " + std::string(name_of(c.buffer.dtype())) + "; with " +
                        std::string(name_of(ab)) + " inputs it must be " + std::string(name_of(ct)) +
                        (ct != ab ? " (f32 accumulation)" : ""));
  }
  GemmArgs g;
  g.trans_a = o.trans_a;
  g.trans_b = o.trans_b;
  g.m = o.trans_a == Transpose::no ? a.rows : a.cols;
  g.k = o.trans_a == Transpose::no ? a.cols : a.rows;
  const std::int64_t kb = o.trans_b == Transpose::no ? b.rows : b.cols;
  g.n = o.trans_b == Transpose::no ? b.cols : b.rows;
  if (kb != g.k || c.rows != g.m || c.cols != g.n) {
    throw ShapeMismatch("matmul: op(a) is (" + std::to_string(g.m) + ", " + std::to_string(g.k) + "), op(b) is (" +
                        std::to_string(kb) + ", " + std::to_string(g.n) + "), c is (" + std::to_string(c.rows) + ", " +
                        std::to_string(c.cols) + "); need op(a) (m, k), op(b) (k, n), c (m, n)");
  }
  checks::no_overlap(c.buffer, a.buffer, "matmul", "c", "a");
  checks::no_overlap(c.buffer, b.buffer, "matmul", "c", "b");
  if (!std::isfinite(o.alpha) || !std::isfinite(o.beta)) {
    throw InvalidArgument("matmul: alpha and beta must be finite");
  }
  if (o.tf32 && ab != DType::f32) {
    throw InvalidArgument("matmul: tf32 applies to f32 inputs, not " + std::string(name_of(ab)));
  }
  g.tf32 = o.tf32;
  g.alpha = o.alpha;
  g.beta = o.beta;
  g.ab_type = ab;
  g.c_type = ct;
  g.a = a.buffer.data();
  g.lda = a.ld;
  g.b = b.buffer.data();
  g.ldb = b.ld;
  g.c = const_cast<Buffer&>(c.buffer).data();
  g.ldc = c.ld;
  g.tier = o.tier;
  return g;
}

std::string list_tiers(const std::vector<MatmulTier>& tiers) {
  std::string text;
  for (auto t : tiers) {
    if (!text.empty()) text += ", ";
    text += name_of(t);
  }
  return text + ", auto";
}

}  // namespace

namespace {
// The tier a checked GEMM runs with: `automatic` chooses, anything else must be offered.
MatmulTier tier_for(Backend& be, const GemmArgs& g) {
  if (g.tier == MatmulTier::automatic) return be.choose_matmul_tier(g);
  const auto tiers = be.matmul_tiers(g.ab_type);
  if (std::find(tiers.begin(), tiers.end(), g.tier) == tiers.end()) {
    throw Unsupported("matmul: backend '" + be.name() + "' has no tier '" + std::string(name_of(g.tier)) + "' for " +
                      std::string(name_of(g.ab_type)) + " inputs; it has: " + list_tiers(tiers));
  }
  return g.tier;
}
}  // namespace

MatmulTier resolve_matmul_tier(const Matrix& a, const Matrix& b, const Matrix& c, const MatmulOptions& options) {
  return tier_for(a.buffer.backend(), gemm_args(a, b, c, options));
}

void matmul(const Matrix& a, const Matrix& b, Matrix c, const MatmulOptions& options, Queue q) {
  GemmArgs g = gemm_args(a, b, c, options);
  Backend& be = a.buffer.backend();
  g.tier = tier_for(be, g);
  if (g.m == 0 || g.n == 0) return;
  if (g.k == 0 || g.alpha == 0) {  // BLAS semantics: A and B are not read
    scale_matrix(be, q, c, g.beta);
    return;
  }
  profile::OpTimer timer(be, q, "matmul");
  if (timer.on())
    timer.set(gemm(g), mat_bytes(a) + mat_bytes(b) + mat_bytes(c), 2.0 * double(g.m) * double(g.n) * double(g.k));
  be.matmul(q, g);
}

void reduce(ReduceOp op, const Buffer& x, Buffer result, Queue q, ReduceVariant variant) {
  const ReduceTraits r = traits_of(op);
  const std::string name(r.name);
  Backend& be = backend_of(x, name.c_str(), "x");
  same_backend(be, result, name.c_str(), "result");
  if (r.float_only) {
    dtype_in(x.dtype(), kFloat, name.c_str(), "x");
  } else {
    dtype_in(x.dtype(), {DType::f32, DType::f64, DType::i32}, name.c_str(), "x");
  }
  same_dtype(r.index_result ? DType::i32 : x.dtype(), result, name.c_str(), "result");
  same_size(1, result, name.c_str(), "result");
  checks::no_overlap(result, x, name.c_str(), "result", "x");
  checks::variant_in(be, variant);
  if (x.size() == 0) {
    if (r.empty_is_zero) {
      be.fill(q, result.dtype(), 1, 0.0, result.data());
      return;
    }
    throw InvalidArgument(name + ": x is empty; the " + name + " of no elements is undefined");
  }
  if (r.index_result && x.size() > static_cast<std::size_t>(INT32_MAX)) {
    throw InvalidArgument(name + ": x has more than 2^31 - 1 elements; the index would not fit the i32 result");
  }
  profile::OpTimer timer(be, q, "reduce");
  if (timer.on()) {
    const bool named = variant != ReduceVariant::automatic;
    timer.set(cat({name_of(op), " ", vec(x), named ? " " : "", named ? name_of(variant) : ""}), x.bytes());
  }
  be.reduce(q, op, x.dtype(), x.size(), x.data(), result.data(), variant);
}

void dot(const Buffer& x, const Buffer& y, Buffer result, Queue q) {
  Backend& be = backend_of(x, "dot", "x");
  same_backend(be, y, "dot", "y");
  same_backend(be, result, "dot", "result");
  dtype_in(x.dtype(), kFloat, "dot", "x");
  same_dtype(x.dtype(), y, "dot", "y");
  same_dtype(x.dtype(), result, "dot", "result");
  same_size(x.size(), y, "dot", "y");
  same_size(1, result, "dot", "result");
  checks::no_overlap(result, x, "dot", "result", "x");
  checks::no_overlap(result, y, "dot", "result", "y");
  if (x.size() == 0) {
    be.fill(q, result.dtype(), 1, 0.0, result.data());
    return;
  }
  profile::OpTimer timer(be, q, "dot");
  if (timer.on()) timer.set(vec(x), 2 * x.bytes());
  be.dot(q, x.dtype(), x.size(), x.data(), y.data(), result.data());
}

namespace {
double read_scalar(const Buffer result) {
  switch (result.dtype()) {
    case DType::f32:
      return result.to_vector<float>()[0];
    case DType::f64:
      return result.to_vector<double>()[0];
    case DType::i32:
      return result.to_vector<std::int32_t>()[0];
    default:
      throw DTypeMismatch("internal: scalar result of unexpected dtype");
  }
}
double reduce_value(ReduceOp op, const Buffer& x) {
  Backend& be = backend_of(x, std::string(name_of(op)).c_str(), "x");
  Buffer result(be, traits_of(op).index_result ? DType::i32 : x.dtype(), 1);
  reduce(op, x, result);
  return read_scalar(result);
}
}  // namespace

double sum(const Buffer& x) { return reduce_value(ReduceOp::sum, x); }
double min(const Buffer& x) { return reduce_value(ReduceOp::min, x); }
double max(const Buffer& x) { return reduce_value(ReduceOp::max, x); }
double norm2(const Buffer& x) { return reduce_value(ReduceOp::norm2, x); }
std::int64_t argmax(const Buffer& x) { return static_cast<std::int64_t>(reduce_value(ReduceOp::argmax, x)); }
double dot(const Buffer& x, const Buffer& y) {
  Backend& be = backend_of(x, "dot", "x");
  Buffer result(be, x.dtype(), 1);
  dot(x, y, result);
  return read_scalar(result);
}

namespace {
void reduce_axis(bool per_row, ReduceOp op, const Matrix& x, Buffer out, Queue q) {
  const char* name = per_row ? "reduce_rows" : "reduce_cols";
  if (!traits_of(op).per_axis) {
    std::string offered;
    for (ReduceOp o : kReduceOps) {
      if (traits_of(o).per_axis) offered += (offered.empty() ? "" : " or ") + std::string(name_of(o));
    }
    throw InvalidArgument(std::string(name) + ": op " + std::string(name_of(op)) + " is not offered; use " + offered);
  }
  matrix_fits(x, name, "x");
  Backend& be = x.buffer.backend();
  same_backend(be, out, name, "out");
  dtype_in(x.buffer.dtype(), {DType::f32, DType::f64, DType::i32}, name, "x");
  same_dtype(x.buffer.dtype(), out, name, "out");
  same_size(static_cast<std::size_t>(per_row ? x.rows : x.cols), out, name, "out");
  if (x.rows == 0 || x.cols == 0) {
    if (!traits_of(op).empty_is_zero && out.size() > 0) {
      throw InvalidArgument(std::string(name) + ": the " + std::string(name_of(op)) +
                            " over zero elements is undefined");
    }
    if (out.size() > 0) be.fill(q, out.dtype(), out.size(), 0.0, out.data());
    return;
  }
  checks::no_overlap(out, x.buffer, name, "out", "x");
  profile::OpTimer timer(be, q, per_row ? "reduce_rows" : "reduce_cols");
  if (timer.on()) timer.set(cat({name_of(op), " ", mat(x)}), mat_bytes(x) + out.bytes());
  if (per_row) {
    be.reduce_rows(q, op, x.buffer.dtype(), x.rows, x.cols, x.buffer.data(), x.ld, out.data());
  } else {
    be.reduce_cols(q, op, x.buffer.dtype(), x.rows, x.cols, x.buffer.data(), x.ld, out.data());
  }
}

void scan(ScanKind kind, const Buffer& x, Buffer out, Queue q, ScanVariant variant) {
  const char* name = kind == ScanKind::inclusive ? "inclusive_scan" : "exclusive_scan";
  Backend& be = backend_of(x, name, "x");
  same_backend(be, out, name, "out");
  dtype_in(x.dtype(), {DType::f32, DType::f64, DType::i32}, name, "x");
  same_dtype(x.dtype(), out, name, "out");
  same_size(x.size(), out, name, "out");
  checks::variant_in(be, variant);
  if (x.size() == 0) return;
  if (x.data() != out.data()) checks::no_overlap(out, x, name, "out", "x (partially: use the same view or none)");
  profile::OpTimer timer(be, q, "scan");
  if (timer.on()) {
    const bool named = variant != ScanVariant::automatic;
    timer.set(cat({vec(x), named ? " " : "", named ? name_of(variant) : ""}), 2 * x.bytes());
  }
  be.scan(q, kind, x.dtype(), x.size(), x.data(), out.data(), variant);
}
}  // namespace

void reduce_rows(ReduceOp op, const Matrix& x, Buffer out, Queue q) { reduce_axis(true, op, x, out, q); }
void reduce_cols(ReduceOp op, const Matrix& x, Buffer out, Queue q) { reduce_axis(false, op, x, out, q); }
void inclusive_scan(const Buffer& x, Buffer out, Queue q, ScanVariant variant) {
  scan(ScanKind::inclusive, x, out, q, variant);
}
void exclusive_scan(const Buffer& x, Buffer out, Queue q, ScanVariant variant) {
  scan(ScanKind::exclusive, x, out, q, variant);
}

void softmax_cross_entropy(const Matrix& logits, const Buffer& labels, Matrix probs, Buffer losses, Queue q,
                           LabelCheck check) {
  const char* name = "softmax_cross_entropy";
  matrix_fits(logits, name, "logits");
  matrix_fits(probs, name, "probs");
  Backend& be = logits.buffer.backend();
  same_backend(be, labels, name, "labels");
  same_backend(be, probs.buffer, name, "probs");
  same_backend(be, losses, name, "losses");
  dtype_in(logits.buffer.dtype(), kFloat, name, "logits");
  same_dtype(DType::i32, labels, name, "labels");
  same_dtype(logits.buffer.dtype(), probs.buffer, name, "probs");
  same_dtype(logits.buffer.dtype(), losses, name, "losses");
  same_size(static_cast<std::size_t>(logits.rows), labels, name, "labels");
  same_size(static_cast<std::size_t>(logits.rows), losses, name, "losses");
  if (probs.rows != logits.rows || probs.cols != logits.cols) {
    throw ShapeMismatch(std::string(name) + ": probs is (" + std::to_string(probs.rows) + ", " +
                        std::to_string(probs.cols) + "), logits (" + std::to_string(logits.rows) + ", " +
                        std::to_string(logits.cols) + ")");
  }
  if (logits.rows == 0) return;
  if (logits.cols == 0) throw InvalidArgument(std::string(name) + ": logits has no columns (no classes)");
  checks::no_overlap(losses, logits.buffer, name, "losses", "logits");
  checks::no_overlap(probs.buffer, logits.buffer, name, "probs",
                     "logits (the loss reads the logits after probs are written)");
  checks::no_overlap(losses, probs.buffer, name, "losses", "probs");
  if (check == LabelCheck::read_back && !be.capturing()) checks::classes_in_range(labels, logits.cols, q, name);
  profile::OpTimer timer(be, q, "softmax_cross_entropy");
  if (timer.on()) timer.set(mat(logits), 3 * mat_bytes(logits) + labels.bytes());
  be.softmax_cross_entropy(q, logits.buffer.dtype(), logits.rows, logits.cols, logits.buffer.data(), logits.ld,
                           static_cast<const std::int32_t*>(labels.data()), probs.buffer.data(), probs.ld,
                           losses.data());
}

void mse(const Buffer& a, const Buffer& b, Buffer result, Queue q) {
  Backend& be = backend_of(a, "mse", "a");
  same_backend(be, b, "mse", "b");
  same_backend(be, result, "mse", "result");
  dtype_in(a.dtype(), kFloat, "mse", "a");
  same_dtype(a.dtype(), b, "mse", "b");
  same_dtype(a.dtype(), result, "mse", "result");
  same_size(a.size(), b, "mse", "b");
  same_size(1, result, "mse", "result");
  checks::no_overlap(result, a, "mse", "result", "a");
  checks::no_overlap(result, b, "mse", "result", "b");
  if (a.size() == 0) throw InvalidArgument("mse: a and b are empty; the mean of no elements is undefined");
  profile::OpTimer timer(be, q, "mse");
  if (timer.on()) timer.set(vec(a), 2 * a.bytes());
  be.mse(q, a.dtype(), a.size(), a.data(), b.data(), result.data());
}

// Buffer's own copy and fill: the public ops, so that they are checked (and profiled) like any
// other copy or fill (declared in buffer.hpp, defined here so that core/ does not depend on ops).
void Buffer::copy_from(const Buffer& src, Queue q) { tandem::copy(src, *this, q); }
void Buffer::fill(double value, Queue q) { tandem::fill(*this, value, q); }

}  // namespace tandem
