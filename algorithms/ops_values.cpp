// The value-returning forms of the ops (ops.hpp): each checks the matrices its result's size
// depends on, makes the result on the first operand's backend (a vector result has an operand's
// size), and runs the out-parameter form into it, which checks the rest.
#include <cstdint>
#include <string>

#include "checks.hpp"
#include "tandem/detail/checked.hpp"
#include "tandem/errors.hpp"
#include "tandem/ops.hpp"

namespace tandem {

using checks::matrix_fits;

namespace {

// A new (rows, cols) matrix of dtype t on be; the element count checked so that it cannot wrap.
Matrix new_matrix(Backend& be, DType t, std::int64_t rows, std::int64_t cols, const char* op) {
  std::int64_t count = 0;
  if (rows < 0 || cols < 0 || !detail::mul_fits(rows, cols, count)) {
    throw InvalidArgument(std::string(op) + ": a " + std::to_string(rows) + " x " + std::to_string(cols) +
                          " result has more elements than a buffer can hold");
  }
  return matrix(Buffer(be, t, static_cast<std::size_t>(count)), rows, cols);
}

Buffer like(const Buffer& x) { return Buffer(x.backend(), x.dtype(), x.size()); }

}  // namespace

Buffer binary(BinaryOp op, const Buffer& x, const Buffer& y, Queue q) {
  Buffer out = like(x);
  binary(op, x, y, out, q);
  return out;
}

Buffer unary(UnaryOp op, const Buffer& x, Queue q) {
  Buffer out = like(x);
  unary(op, x, out, q);
  return out;
}

Buffer scale(double alpha, const Buffer& x, Queue q) {
  Buffer out = like(x);
  scale(alpha, x, out, q);
  return out;
}

Buffer convert(const Buffer& x, DType to, Queue q) {
  Buffer out(x.backend(), to, x.size());
  convert(x, out, q);
  return out;
}

Matrix add_row_vector(const Matrix& x, const Buffer& bias, Queue q) {
  matrix_fits(x, "add_row_vector", "x");
  Matrix out = new_matrix(x.buffer.backend(), x.buffer.dtype(), x.rows, x.cols, "add_row_vector");
  add_row_vector(x, bias, out, q);
  return out;
}

Matrix bias_activation(const Matrix& x, const Buffer& bias, UnaryOp act, Queue q) {
  matrix_fits(x, "bias_activation", "x");
  Matrix out = new_matrix(x.buffer.backend(), x.buffer.dtype(), x.rows, x.cols, "bias_activation");
  bias_activation(x, bias, act, out, nullptr, q);
  return out;
}

Matrix matrix_add(double alpha, const Matrix& a, double beta, const Matrix& b, Queue q) {
  matrix_fits(a, "matrix_add", "a");
  Matrix c = new_matrix(a.buffer.backend(), a.buffer.dtype(), a.rows, a.cols, "matrix_add");
  matrix_add(alpha, a, beta, b, c, q);
  return c;
}

Matrix transpose(const Matrix& a, Queue q) {
  matrix_fits(a, "transpose", "a");
  Matrix out = new_matrix(a.buffer.backend(), a.buffer.dtype(), a.cols, a.rows, "transpose");
  transpose(a, out, q);
  return out;
}

Matrix gather_rows(const Matrix& x, const Buffer& index, Queue q) {
  matrix_fits(x, "gather_rows", "x");
  Matrix out = new_matrix(x.buffer.backend(), x.buffer.dtype(), static_cast<std::int64_t>(index.size()), x.cols,
                          "gather_rows");
  gather_rows(x, index, out, q);
  return out;
}

Matrix matmul(const Matrix& a, const Matrix& b, const MatmulOptions& options, Queue q) {
  if (options.beta != 0) {
    throw InvalidArgument("matmul: the form that returns c makes a new c, so beta must be 0 (it is " +
                          std::to_string(options.beta) + "); give c to accumulate into it");
  }
  matrix_fits(a, "matmul", "a");
  matrix_fits(b, "matmul", "b");
  const DType ab = a.buffer.dtype();
  const DType ct = ab == DType::f16 || ab == DType::bf16 ? DType::f32 : ab;
  const std::int64_t m = options.trans_a == Transpose::no ? a.rows : a.cols;
  const std::int64_t k = options.trans_a == Transpose::no ? a.cols : a.rows;
  const std::int64_t kb = options.trans_b == Transpose::no ? b.rows : b.cols;
  const std::int64_t n = options.trans_b == Transpose::no ? b.cols : b.rows;
  if (k != kb) {
    throw ShapeMismatch("matmul: op(a) is " + std::to_string(m) + " x " + std::to_string(k) + " but op(b) is " +
                        std::to_string(kb) + " x " + std::to_string(n));
  }
  Matrix c = new_matrix(a.buffer.backend(), ct, m, n, "matmul");
  matmul(a, b, c, options, q);
  return c;
}

Buffer reduce_rows(ReduceOp op, const Matrix& x, Queue q) {
  matrix_fits(x, "reduce_rows", "x");
  Buffer out(x.buffer.backend(), x.buffer.dtype(), static_cast<std::size_t>(x.rows));
  reduce_rows(op, x, out, q);
  return out;
}

Buffer reduce_cols(ReduceOp op, const Matrix& x, Queue q) {
  matrix_fits(x, "reduce_cols", "x");
  Buffer out(x.buffer.backend(), x.buffer.dtype(), static_cast<std::size_t>(x.cols));
  reduce_cols(op, x, out, q);
  return out;
}

Buffer inclusive_scan(const Buffer& x, Queue q, ScanVariant variant) {
  Buffer out = like(x);
  inclusive_scan(x, out, q, variant);
  return out;
}

Buffer exclusive_scan(const Buffer& x, Queue q, ScanVariant variant) {
  Buffer out = like(x);
  exclusive_scan(x, out, q, variant);
  return out;
}

}  // namespace tandem
