// The algorithm set on tandem.Array: the elementwise family (one function per op of the op
// table), matrix ops, matmul with tiers and GEMM arguments, reductions, scans, softmax with
// cross-entropy and MSE. Every op releases the GIL while tandem works; results are new arrays
// unless `out` is given.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>

#include "bindings.hpp"
#include "tandem/verify.hpp"

namespace tandem::py {

namespace {

using Release = nb::call_guard<nb::gil_scoped_release>;

Backend& backend_of(const Array& a) { return a.buffer.backend(); }

void same_backend(const Array& a, const Array& b, const char* what) {
  if (&backend_of(a) != &backend_of(b)) {
    throw DeviceMismatch(std::string(what) + ": arrays on '" + backend_of(a).name() + "' and '" + backend_of(b).name() +
                         "'; move one with .to(backend)");
  }
}

ReduceOp parse_reduce(const std::string& name) {
  for (ReduceOp op : kReduceOps) {
    if (name_of(op) == name) return op;
  }
  throw InvalidArgument("unknown reduction '" + name + "': use sum, min, max, argmax or norm2");
}

double read_scalar(const Buffer& b) {
  if (b.dtype() == DType::f32) return b.to_vector<float>()[0];
  if (b.dtype() == DType::i32) return b.to_vector<std::int32_t>()[0];
  return b.to_vector<double>()[0];
}

}  // namespace

Array binary_op(BinaryOp op, const Array& x, const Array& y, const Array* out) {
  same_backend(x, y, "binary op");
  if (x.shape != y.shape) {
    throw ShapeMismatch(std::string(name_of(op)) + ": the shapes " + shape_text(x.shape) + " and " +
                        shape_text(y.shape) + " differ; tandem does not broadcast");
  }
  Array o = output(out, backend_of(x), x.buffer.dtype(), x.shape, "binary op");
  tandem::binary(op, x.buffer, y.buffer, o.buffer);
  return o;
}

Array unary_op(UnaryOp op, const Array& x, const Array* out) {
  Array o = output(out, backend_of(x), x.buffer.dtype(), x.shape, "unary op");
  tandem::unary(op, x.buffer, o.buffer);
  return o;
}

Array matmul(const Array& a, const Array& b, const Array* out, bool trans_a, bool trans_b, double alpha, double beta,
             const std::string& tier, bool tf32) {
  same_backend(a, b, "matmul");
  const Matrix ma = a.matrix("matmul (a)"), mb = b.matrix("matmul (b)");
  const std::int64_t m = trans_a ? ma.cols : ma.rows, n = trans_b ? mb.rows : mb.cols;
  const DType ab = a.buffer.dtype();
  const DType c_type = (ab == DType::f16 || ab == DType::bf16) ? DType::f32 : ab;
  if (out == nullptr && beta != 0) throw InvalidArgument("matmul: beta != 0 adds to `out`, so give out=");
  Array c = output(out, backend_of(a), c_type, {m, n}, "matmul");
  Matrix mc = c.matrix("matmul (out)");
  MatmulOptions o;
  o.trans_a = trans_a ? Transpose::yes : Transpose::no;
  o.trans_b = trans_b ? Transpose::yes : Transpose::no;
  o.alpha = alpha;
  o.beta = beta;
  o.tier = parse_matmul_tier(tier);
  o.tf32 = tf32;
  tandem::matmul(ma, mb, mc, o);
  return c;
}

Array transpose(const Array& a, const Array* out) {
  const Matrix ma = a.matrix("transpose");
  Array o = output(out, backend_of(a), a.buffer.dtype(), {ma.cols, ma.rows}, "transpose");
  Matrix mo = o.matrix("transpose (out)");
  tandem::transpose(ma, mo);
  return o;
}

namespace {

// The elementwise family (one function per op of the op table), axpy, scale, fill, copy and astype.
void bind_elementwise(nb::module_& m) {
  nb::list unary_names, binary_names;
  for (UnaryOp op : kUnaryOps) {
    const std::string name(name_of(op));
    unary_names.append(name);
    m.def(
        name.c_str(), [op](const Array& x, const Array* out) { return unary_op(op, x, out); }, nb::arg("x"),
        nb::arg("out") = nb::none(), Release(), ("Elementwise " + name + "(x) (float32, float64).").c_str());
  }
  for (BinaryOp op : kBinaryOps) {
    const std::string name(name_of(op));
    binary_names.append(name);
    m.def(
        name.c_str(), [op](const Array& x, const Array& y, const Array* out) { return binary_op(op, x, y, out); },
        nb::arg("x"), nb::arg("y"), nb::arg("out") = nb::none(), Release(),
        ("Elementwise " + name + " of two arrays of one shape and dtype (float32, float64).").c_str());
  }
  m.attr("unary_ops") = nb::tuple(unary_names);
  // For bench/python_overhead.py: the same call as tandem.add(x, y, out=out), `calls` times in a
  // C++ loop (queue drained at the end), so that the per-call cost of the binding can be told apart.
  m.def(
      "_cpp_add_seconds",
      [](const Array& x, const Array& y, Array& out, std::size_t calls) {
        same_backend(x, y, "_cpp_add_seconds");
        const auto start = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < calls; ++i) tandem::add(x.buffer, y.buffer, out.buffer);
        backend_of(out).synchronize(Queue{});
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      },
      nb::arg("x"), nb::arg("y"), nb::arg("out"), nb::arg("calls"), Release());
  m.attr("binary_ops") = nb::tuple(binary_names);

  m.def(
      "axpy",
      [](double alpha, const Array& x, Array& y) {
        same_backend(x, y, "axpy"), tandem::axpy(alpha, x.buffer, y.buffer);
      },
      nb::arg("alpha"), nb::arg("x"), nb::arg("y"), Release(), "y += alpha * x, in place.");
  m.def(
      "scale",
      [](double alpha, const Array& x, const Array* out) {
        Array o = output(out, backend_of(x), x.buffer.dtype(), x.shape, "scale");
        tandem::scale(alpha, x.buffer, o.buffer);
        return o;
      },
      nb::arg("alpha"), nb::arg("x"), nb::arg("out") = nb::none(), Release(), "alpha * x.");
  m.def(
      "fill", [](Array& x, double value) { tandem::fill(x.buffer, value); }, nb::arg("x"), nb::arg("value"), Release(),
      "Every element of x = value, in place.");
  m.def(
      "copy",
      [](const Array& x, const Array* out) {
        Array o = output(out, backend_of(x), x.buffer.dtype(), x.shape, "copy");
        tandem::copy(x.buffer, o.buffer);
        return o;
      },
      nb::arg("x"), nb::arg("out") = nb::none(), Release(), "A copy of x on its backend.");
  m.def(
      "astype",
      [](const Array& x, nb::handle dtype) {
        const DType to = dtype_arg(dtype, x.buffer.dtype());
        nb::gil_scoped_release release;
        Array o = empty(backend_of(x), to, x.shape);
        tandem::convert(x.buffer, o.buffer);
        return o;
      },
      nb::arg("x"), nb::arg("dtype"),
      "x converted to dtype (float16, bfloat16, float32, float64), rounded to nearest even.");
}

// matrix_add, transpose, add_row_vector, bias_activation and gather_rows on 2-D arrays.
void bind_matrix_ops(nb::module_& m) {
  m.def(
      "matrix_add",
      [](const Array& a, const Array& b, double alpha, double beta, const Array* out) {
        same_backend(a, b, "matrix_add");
        Array c = output(out, backend_of(a), a.buffer.dtype(), a.shape, "matrix_add");
        Matrix mc = c.matrix("matrix_add (out)");
        tandem::matrix_add(alpha, a.matrix("matrix_add (a)"), beta, b.matrix("matrix_add (b)"), mc);
        return c;
      },
      nb::arg("a"), nb::arg("b"), nb::arg("alpha") = 1.0, nb::arg("beta") = 1.0, nb::arg("out") = nb::none(), Release(),
      "alpha * a + beta * b for 2-D arrays.");
  m.def("transpose", &transpose, nb::arg("a"), nb::arg("out") = nb::none(), Release(),
        "The transpose of a 2-D array, into out (a (cols, rows) array on a's backend) or a new one.");
  m.def(
      "add_row_vector",
      [](const Array& x, const Array& bias, const Array* out) {
        same_backend(x, bias, "add_row_vector");
        Array o = output(out, backend_of(x), x.buffer.dtype(), x.shape, "add_row_vector");
        Matrix mo = o.matrix("add_row_vector (out)");
        tandem::add_row_vector(x.matrix("add_row_vector"), bias.buffer, mo);
        return o;
      },
      nb::arg("x"), nb::arg("bias"), nb::arg("out") = nb::none(), Release(), "x + bias on every row of x.");
  m.def(
      "bias_activation",
      [](const Array& x, const Array& bias, const std::string& activation, const Array* out) {
        same_backend(x, bias, "bias_activation");
        Array o = output(out, backend_of(x), x.buffer.dtype(), x.shape, "bias_activation");
        Matrix mo = o.matrix("bias_activation (out)");
        tandem::bias_activation(x.matrix("bias_activation"), bias.buffer, parse_activation(activation), mo);
        return o;
      },
      nb::arg("x"), nb::arg("bias"), nb::arg("activation"), nb::arg("out") = nb::none(), Release(),
      "activation(x + bias on every row), fused.");
  m.def(
      "gather_rows",
      [](const Array& x, const Array& index, const Array* out) {
        same_backend(x, index, "gather_rows");
        const Matrix mx = x.matrix("gather_rows");
        Array o = output(out, backend_of(x), x.buffer.dtype(), {static_cast<std::int64_t>(index.size()), mx.cols},
                         "gather_rows");
        Matrix mo = o.matrix("gather_rows (out)");
        tandem::gather_rows(mx, index.buffer, mo);
        return o;
      },
      nb::arg("x"), nb::arg("index"), nb::arg("out") = nb::none(), Release(),
      "Rows index[0], index[1], ... of x (index: int32); an index out of range gives a row of NaN.");
}

// matmul with its tiers and GEMM arguments, and the tier 'auto' picks.
void bind_matmul(nb::module_& m) {
  m.def("matmul", &matmul, nb::arg("a"), nb::arg("b"), nb::arg("out") = nb::none(), nb::kw_only(),
        nb::arg("trans_a") = false, nb::arg("trans_b") = false, nb::arg("alpha") = 1.0, nb::arg("beta") = 0.0,
        nb::arg("tier") = "auto", nb::arg("tf32") = false, Release(),
        "out = alpha * op(a) @ op(b) + beta * out for 2-D arrays (float32, float64; float16 and bfloat16\n"
        "inputs give float32). tier: auto, naive, tiled, register_blocked, tensor_core or vendor.");
  m.def(
      "matmul_tier",
      [](const Array& a, const Array& b, bool trans_a, bool trans_b) {
        const Matrix ma = a.matrix("matmul_tier (a)"), mb = b.matrix("matmul_tier (b)");
        const std::int64_t rows = trans_a ? ma.cols : ma.rows, cols = trans_b ? mb.rows : mb.cols;
        const DType ab = a.buffer.dtype();
        Array c = empty(backend_of(a), (ab == DType::f16 || ab == DType::bf16) ? DType::f32 : ab, {rows, cols});
        MatmulOptions o;
        o.trans_a = trans_a ? Transpose::yes : Transpose::no;
        o.trans_b = trans_b ? Transpose::yes : Transpose::no;
        return std::string(name_of(resolve_matmul_tier(ma, mb, c.matrix("matmul_tier"), o)));
      },
      nb::arg("a"), nb::arg("b"), nb::kw_only(), nb::arg("trans_a") = false, nb::arg("trans_b") = false, Release(),
      "The tier matmul's 'auto' picks for these operands (it allocates the output to ask).");
}

// sum, min, max, argmax, norm2, dot, reduce and the row and column reductions.
void bind_reductions(nb::module_& m) {
  m.def(
      "sum", [](const Array& x) { return tandem::sum(x.buffer); }, nb::arg("x"), Release());
  m.def(
      "min", [](const Array& x) { return tandem::min(x.buffer); }, nb::arg("x"), Release());
  m.def(
      "max", [](const Array& x) { return tandem::max(x.buffer); }, nb::arg("x"), Release());
  m.def(
      "argmax", [](const Array& x) { return tandem::argmax(x.buffer); }, nb::arg("x"), Release(),
      "The index of the first maximum (of the first NaN if any).");
  m.def(
      "norm2", [](const Array& x) { return tandem::norm2(x.buffer); }, nb::arg("x"), Release(),
      "The Euclidean norm of all elements (a Python float).");
  m.def(
      "dot", [](const Array& x, const Array& y) { return same_backend(x, y, "dot"), tandem::dot(x.buffer, y.buffer); },
      nb::arg("x"), nb::arg("y"), Release(),
      "The sum of x * y over all elements (a Python float); x and y of one size, dtype and backend.");
  m.def(
      "allclose",
      [](const Array& a, const Array& b, double rtol, double atol, bool equal_nan) {
        if (a.shape != b.shape) {
          throw ShapeMismatch("allclose: the shapes " + shape_text(a.shape) + " and " + shape_text(b.shape) + " differ");
        }
        return tandem::allclose(a.buffer, b.buffer, rtol, atol, equal_nan);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("rtol") = 1e-5, nb::arg("atol") = 1e-8, nb::arg("equal_nan") = false,
      Release(),
      "NumPy's allclose: |a - b| <= atol + rtol * |b| everywhere (NaNs equal only with equal_nan); the arrays may be "
      "on different backends and of different dtypes.");
  m.def(
      "reduce",
      [](const std::string& op, const Array& x, const std::string& variant) {
        const ReduceOp r = parse_reduce(op);
        Buffer result(backend_of(x), r == ReduceOp::argmax ? DType::i32 : x.buffer.dtype(), 1);
        tandem::reduce(r, x.buffer, result, {}, parse_reduce_variant(variant));
        return read_scalar(result);
      },
      nb::arg("op"), nb::arg("x"), nb::arg("variant") = "", Release(),
      "op (sum, min, max, argmax, norm2) over x, with one of the backend's variants if named.");
  m.def(
      "reduce_rows",
      [](const Array& x, const std::string& op) {
        const Matrix mx = x.matrix("reduce_rows");
        Array o = empty(backend_of(x), x.buffer.dtype(), {mx.rows});
        tandem::reduce_rows(parse_reduce(op), mx, o.buffer);
        return o;
      },
      nb::arg("x"), nb::arg("op") = "sum", Release(), "sum or max of each row of a 2-D array.");
  m.def(
      "reduce_cols",
      [](const Array& x, const std::string& op) {
        const Matrix mx = x.matrix("reduce_cols");
        Array o = empty(backend_of(x), x.buffer.dtype(), {mx.cols});
        tandem::reduce_cols(parse_reduce(op), mx, o.buffer);
        return o;
      },
      nb::arg("x"), nb::arg("op") = "sum", Release(), "sum or max of each column of a 2-D array.");
}

// inclusive_scan and exclusive_scan.
void bind_scans(nb::module_& m) {
  for (const char* name : {"inclusive_scan", "exclusive_scan"}) {
    const bool inclusive = name[0] == 'i';
    m.def(
        name,
        [inclusive](const Array& x, const Array* out, const std::string& variant) {
          Array o = output(out, backend_of(x), x.buffer.dtype(), x.shape, "scan");
          if (inclusive) {
            tandem::inclusive_scan(x.buffer, o.buffer, {}, parse_scan_variant(variant));
          } else {
            tandem::exclusive_scan(x.buffer, o.buffer, {}, parse_scan_variant(variant));
          }
          return o;
        },
        nb::arg("x"), nb::arg("out") = nb::none(), nb::arg("variant") = "", Release(),
        inclusive ? "Cumulative sum: out[i] = x[0] + ... + x[i] (float32, float64, int32; out may be x)."
                  : "out[i] = x[0] + ... + x[i-1], out[0] = 0 (float32, float64, int32; out may be x).");
  }
}

// softmax_cross_entropy and mse.
void bind_losses(nb::module_& m) {
  m.def(
      "softmax_cross_entropy",
      [](const Array& logits, const Array& labels) {
        same_backend(logits, labels, "softmax_cross_entropy");
        const Matrix ml = logits.matrix("softmax_cross_entropy");
        Array probs = empty(backend_of(logits), logits.buffer.dtype(), logits.shape);
        Array losses = empty(backend_of(logits), logits.buffer.dtype(), {ml.rows});
        Matrix mp = probs.matrix("softmax_cross_entropy (probs)");
        tandem::softmax_cross_entropy(ml, labels.buffer, mp, losses.buffer);
        return std::pair<Array, Array>(probs, losses);
      },
      nb::arg("logits"), nb::arg("labels"), Release(),
      "(probs, losses): the row-wise softmax of logits (rows, classes) and -log probs[r, labels[r]]\n"
      "(labels: int32; one outside [0, classes) raises InvalidArgument naming its row).");
  m.def(
      "mse",
      [](const Array& a, const Array& b) {
        same_backend(a, b, "mse");
        Buffer result(backend_of(a), a.buffer.dtype(), 1);
        tandem::mse(a.buffer, b.buffer, result);
        return read_scalar(result);
      },
      nb::arg("a"), nb::arg("b"), Release(), "mean((a - b)^2).");
}

}  // namespace

void bind_ops(nb::module_& m) {
  bind_elementwise(m);
  bind_matrix_ops(m);
  bind_matmul(m);
  bind_reductions(m);
  bind_scans(m);
  bind_losses(m);
}

}  // namespace tandem::py
