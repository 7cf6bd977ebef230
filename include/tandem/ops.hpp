// The primitive ops. Every function checks its arguments (shapes, dtypes, devices, leading
// dimensions, tiers) and throws a typed error before any work starts, then runs on the backend
// that owns the buffers, on queue q (default: the backend's default queue).
//
// Two forms of each op: one writes into an output the caller gives (a Buffer or Matrix handle,
// taken by value: copies of a handle share its memory, so a temporary view such as
// matmul(a, b, matrix(c, 2, 2)) is written through), and one returns a new buffer or matrix on the
// operands' backend (Buffer c = add(a, b); Matrix c = matmul(a, b)).
#pragma once

#include <cstdint>

#include "tandem/backend.hpp"
#include "tandem/buffer.hpp"

namespace tandem {

// A row-major matrix view over a buffer: element (i, j) at [i * ld + j], ld >= cols.
struct Matrix {
  Buffer buffer;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;
};
// Checks that the buffer holds (rows - 1) * ld + cols elements; ld = 0 means ld = cols.
Matrix matrix(Buffer buffer, std::int64_t rows, std::int64_t cols, std::int64_t ld = 0);

// ---- elementwise (f32, f64) ----
void binary(BinaryOp op, const Buffer& x, const Buffer& y, Buffer out, Queue q = {});
void unary(UnaryOp op, const Buffer& x, Buffer out, Queue q = {});
inline void add(const Buffer& x, const Buffer& y, Buffer out, Queue q = {}) { binary(BinaryOp::add, x, y, out, q); }
inline void sub(const Buffer& x, const Buffer& y, Buffer out, Queue q = {}) { binary(BinaryOp::sub, x, y, out, q); }
inline void mul(const Buffer& x, const Buffer& y, Buffer out, Queue q = {}) { binary(BinaryOp::mul, x, y, out, q); }
inline void div(const Buffer& x, const Buffer& y, Buffer out, Queue q = {}) { binary(BinaryOp::div, x, y, out, q); }
inline void exp(const Buffer& x, Buffer out, Queue q = {}) { unary(UnaryOp::exp, x, out, q); }
// Each activation of the op table, by name: relu(x, out), and its derivative relu_grad(v, dy, dx):
// dx = dy * f'(x), with v the layer's input x or output y as the row's grad_from says.
#define TANDEM_ACTIVATION_SHORTCUTS_(n, S, kind)                                            \
  TANDEM_IF_##kind(                                                                         \
      inline void n(const Buffer& x, Buffer out, Queue q = {}) {                           \
        unary(UnaryOp::n, x, out, q);                                                       \
      } inline void n##_grad(const Buffer& v, const Buffer& dy, Buffer dx, Queue q = {}) { \
        binary(BinaryOp::n##_grad, v, dy, dx, q);                                           \
      })
TANDEM_UNARY_OPS(TANDEM_ACTIVATION_SHORTCUTS_)
#undef TANDEM_ACTIVATION_SHORTCUTS_
// y += alpha * x
void axpy(double alpha, const Buffer& x, Buffer y, Queue q = {});
// out = alpha * x
void scale(double alpha, const Buffer& x, Buffer out, Queue q = {});
// out = value (any dtype)
void fill(Buffer out, double value, Queue q = {});
// dst = src (same backend, dtype, size)
void copy(const Buffer& src, Buffer dst, Queue q = {});

// ---- matrix ----
// out = x + bias broadcast over rows; bias has x.cols elements.
void add_row_vector(const Matrix& x, const Buffer& bias, Matrix out, Queue q = {});
// A layer's epilogue in one pass: out = act(x + bias broadcast over rows), and the pre-activation
// x + bias into *z when z is given (z may be x itself). act: an activation (is_activation).
void bias_activation(const Matrix& x, const Buffer& bias, UnaryOp act, Matrix out, Matrix* z = nullptr, Queue q = {});
// c = alpha * a + beta * b
void matrix_add(double alpha, const Matrix& a, double beta, const Matrix& b, Matrix c, Queue q = {});
// out = a^T; out is (a.cols, a.rows).
void transpose(const Matrix& a, Matrix out, Queue q = {});

// out row r = x row index[r]: out is (index.size(), x.cols) and x's dtype; index is i32 and stays on
// the device (mini-batches drawn from a data set kept there). An index outside [0, x.rows) gives a
// row of NaN (-1 for i32): the op never reads out of bounds and never syncs to check.
void gather_rows(const Matrix& x, const Buffer& index, Matrix out, Queue q = {});
// out = x converted to out's dtype (f16, bf16, f32, f64; round to nearest even), same size.
void convert(const Buffer& x, Buffer out, Queue q = {});

struct MatmulOptions {
  Transpose trans_a = Transpose::no;
  Transpose trans_b = Transpose::no;
  double alpha = 1;
  double beta = 0;
  MatmulTier tier = MatmulTier::automatic;
  // f32 inputs: let a tier that can use TF32 tensor cores do so (products of 10-bit mantissas,
  // f32 accumulation; today cuda's vendor tier). Other tiers compute in f32 as always.
  bool tf32 = false;
};
// GEMM: c = alpha * op(a) * op(b) + beta * c. a and b are f32, f64, f16 or bf16 (the same);
// c is f32 for f16/bf16 inputs (f32 accumulation), else the input type. A tier the backend lacks
// throws Unsupported listing the ones it has; only `automatic` chooses.
void matmul(const Matrix& a, const Matrix& b, Matrix c, const MatmulOptions& options = {}, Queue q = {});
// The tier `automatic` would pick for these operands.
MatmulTier resolve_matmul_tier(const Matrix& a, const Matrix& b, const Matrix& c, const MatmulOptions& options = {});

// ---- the value-returning forms: a new buffer (matrix) on the first operand's backend ----
// binary, unary and their shortcuts: x's dtype and size (y must match, as above).
Buffer binary(BinaryOp op, const Buffer& x, const Buffer& y, Queue q = {});
Buffer unary(UnaryOp op, const Buffer& x, Queue q = {});
inline Buffer add(const Buffer& x, const Buffer& y, Queue q = {}) { return binary(BinaryOp::add, x, y, q); }
inline Buffer sub(const Buffer& x, const Buffer& y, Queue q = {}) { return binary(BinaryOp::sub, x, y, q); }
inline Buffer mul(const Buffer& x, const Buffer& y, Queue q = {}) { return binary(BinaryOp::mul, x, y, q); }
inline Buffer div(const Buffer& x, const Buffer& y, Queue q = {}) { return binary(BinaryOp::div, x, y, q); }
inline Buffer exp(const Buffer& x, Queue q = {}) { return unary(UnaryOp::exp, x, q); }
#define TANDEM_ACTIVATION_VALUES_(n, S, kind) \
  TANDEM_IF_##kind(inline Buffer n(const Buffer& x, Queue q = {}) { return unary(UnaryOp::n, x, q); })
TANDEM_UNARY_OPS(TANDEM_ACTIVATION_VALUES_)
#undef TANDEM_ACTIVATION_VALUES_
Buffer scale(double alpha, const Buffer& x, Queue q = {});
Buffer convert(const Buffer& x, DType to, Queue q = {});
Matrix add_row_vector(const Matrix& x, const Buffer& bias, Queue q = {});
Matrix bias_activation(const Matrix& x, const Buffer& bias, UnaryOp act, Queue q = {});
Matrix matrix_add(double alpha, const Matrix& a, double beta, const Matrix& b, Queue q = {});
Matrix transpose(const Matrix& a, Queue q = {});
Matrix gather_rows(const Matrix& x, const Buffer& index, Queue q = {});
// c = alpha * op(a) * op(b), (rows of op(a), cols of op(b)), dtype as above. There is no c to
// accumulate into: options.beta must be 0 (InvalidArgument otherwise).
Matrix matmul(const Matrix& a, const Matrix& b, const MatmulOptions& options = {}, Queue q = {});

// ---- reductions (f32, f64, i32; dot, norm2 and mse f32/f64) ----
// result (1 element, x's dtype; i32 for argmax) = op(x). x must not be empty.
// variant: automatic (the backend's default) or one of x's backend's reduce_variants() (teaching
// variants and the vendor library's, for the benchmark); another throws Unsupported listing them.
void reduce(ReduceOp op, const Buffer& x, Buffer result, Queue q = {},
            ReduceVariant variant = ReduceVariant::automatic);
void dot(const Buffer& x, const Buffer& y, Buffer result, Queue q = {});
// Convenience forms that wait and return the value on the host.
double sum(const Buffer& x);
double min(const Buffer& x);
double max(const Buffer& x);
std::int64_t argmax(const Buffer& x);
double dot(const Buffer& x, const Buffer& y);
double norm2(const Buffer& x);
// out[r] = op over row r (out has x.rows elements); op is sum or max.
void reduce_rows(ReduceOp op, const Matrix& x, Buffer out, Queue q = {});
// out[c] = op over column c (out has x.cols elements); op is sum or max.
void reduce_cols(ReduceOp op, const Matrix& x, Buffer out, Queue q = {});
Buffer reduce_rows(ReduceOp op, const Matrix& x, Queue q = {});
Buffer reduce_cols(ReduceOp op, const Matrix& x, Queue q = {});

// ---- scans (f32, f64, i32; out may be x) ----
// variant: automatic or one of x's backend's scan_variants().
void inclusive_scan(const Buffer& x, Buffer out, Queue q = {}, ScanVariant variant = ScanVariant::automatic);
void exclusive_scan(const Buffer& x, Buffer out, Queue q = {}, ScanVariant variant = ScanVariant::automatic);
Buffer inclusive_scan(const Buffer& x, Queue q = {}, ScanVariant variant = ScanVariant::automatic);
Buffer exclusive_scan(const Buffer& x, Queue q = {}, ScanVariant variant = ScanVariant::automatic);

// ---- ML helpers ----
// probs = row-wise softmax(logits); losses[r] = -log probs[r][labels[r]]. labels: i32, rows elements.
// A label outside [0, cols) is refused (InvalidArgument naming the row): by default the labels are
// read back before the kernel runs (rows x 4 bytes; it waits for the queue). LabelCheck::trusted
// skips that for callers that checked them already (tandem's training loop), as does recording a
// graph (the buffer is read at replay); an out-of-range label then gives a NaN loss for its row.
enum class LabelCheck { read_back, trusted };
void softmax_cross_entropy(const Matrix& logits, const Buffer& labels, Matrix probs, Buffer losses, Queue q = {},
                           LabelCheck check = LabelCheck::read_back);
// result = mean((a - b)^2)
void mse(const Buffer& a, const Buffer& b, Buffer result, Queue q = {});

}  // namespace tandem
