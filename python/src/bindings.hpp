// The Python module tandem._tandem (nanobind): shared pieces of its five parts (module.cpp:
// errors, backends, info, check, compare; array.cpp: the Array type, NumPy and DLPack;
// ops.cpp: the algorithm set; ml.cpp: data, regression, the MLP; verify.cpp: the oracle).
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tandem/tandem.hpp"

namespace tandem::py {

namespace nb = nanobind;

// A buffer with a row-major, compact shape: what Python sees as tandem.Array.
struct Array {
  Buffer buffer;
  std::vector<std::int64_t> shape;

  std::size_t size() const { return buffer.size(); }
  std::size_t ndim() const { return shape.size(); }
  // The array as a matrix: 2-D arrays only (ShapeMismatch naming `what` otherwise).
  Matrix matrix(const char* what) const;
};

// "(3, 4)", "(5,)": a shape as NumPy writes it, for messages.
std::string shape_text(const std::vector<std::int64_t>& shape);

// The backend a call names: None (the default backend: TANDEM_BACKEND, else auto), a name
// ("openmp", "cuda:1", "auto") or a Backend object.
Backend& backend_arg(nb::handle backend);
// "float32", numpy.float32, numpy.dtype("float32"), ...; None gives `fallback`.
DType dtype_arg(nb::handle dtype, DType fallback);
// NumPy's name of a dtype: float16, bfloat16, float32, float64, int32.
const char* dtype_name(DType t);

// A new array of this shape on the backend; contents undefined.
Array empty(Backend& backend, DType dtype, std::vector<std::int64_t> shape);
// `out` when given (checked against shape and dtype), else a new array.
Array output(const Array* out, Backend& backend, DType dtype, const std::vector<std::int64_t>& shape, const char* what);

// The ops behind Array's operators (ops.cpp).
Array binary_op(BinaryOp op, const Array& x, const Array& y, const Array* out);
Array unary_op(UnaryOp op, const Array& x, const Array* out);
Array matmul(const Array& a, const Array& b, const Array* out, bool trans_a, bool trans_b, double alpha, double beta,
             const std::string& tier, bool tf32);
Array transpose(const Array& a, const Array* out);

void bind_core(nb::module_& m);
void bind_array(nb::module_& m);
void bind_ops(nb::module_& m);
void bind_ml(nb::module_& m);
void bind_verify(nb::module_& m);

}  // namespace tandem::py
