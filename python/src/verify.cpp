// tandem.verify's C++ half: the oracle's comparisons for a user's own results (verify::compare
// with rtol/atol or with an op's derived bound, verify::check recomputing an op on the float64
// reference) and the Comparison they return. python/tandem/verify.py gives them their names.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>

#include "bindings.hpp"
#include "tandem/verify.hpp"

namespace tandem::py {

namespace {

using Release = nb::call_guard<nb::gil_scoped_release>;

std::optional<UnaryOp> unary_named(const std::string& name) {
  for (UnaryOp op : kUnaryOps) {
    if (name_of(op) == name) return op;
  }
  return std::nullopt;
}

std::optional<BinaryOp> binary_named(const std::string& name) {
  for (BinaryOp op : kBinaryOps) {
    if (name_of(op) == name) return op;
  }
  return std::nullopt;
}

[[noreturn]] void unknown_op(const std::string& name) {
  std::string known;
  for (UnaryOp op : kUnaryOps) known += (known.empty() ? "" : ", ") + std::string(name_of(op));
  for (BinaryOp op : kBinaryOps) known += ", " + std::string(name_of(op));
  throw InvalidArgument("verify: unknown op '" + name + "': use one of " + known);
}

void same_shape(const Array& a, const Array& b, const char* what, const char* names) {
  if (a.shape != b.shape) {
    throw ShapeMismatch(std::string(what) + ": the shapes of " + names + ", " + shape_text(a.shape) + " and " +
                        shape_text(b.shape) + ", differ");
  }
}

// op given: the op's bound; None: rtol and atol.
verify::Comparison compare_arrays(const Array& actual, const Array& expected, const std::optional<std::string>& op,
                                  double rtol, double atol) {
  same_shape(actual, expected, "verify.compare", "actual and expected");
  if (!op) return verify::compare(actual.buffer, expected.buffer, rtol, atol);
  if (const auto u = unary_named(*op)) return verify::compare(actual.buffer, expected.buffer, *u);
  if (const auto b = binary_named(*op)) return verify::compare(actual.buffer, expected.buffer, *b);
  unknown_op(*op);
}

verify::Comparison check_op(const std::string& op, const std::vector<const Array*>& inputs, const Array& out) {
  for (const Array* x : inputs) same_shape(*x, out, "verify.check", "an input and out");
  if (const auto u = unary_named(op)) {
    if (inputs.size() != 1) throw InvalidArgument("verify.check: " + op + " takes one input");
    return verify::check(*u, inputs[0]->buffer, out.buffer);
  }
  if (const auto b = binary_named(op)) {
    if (inputs.size() != 2) throw InvalidArgument("verify.check: " + op + " takes two inputs");
    return verify::check(*b, inputs[0]->buffer, inputs[1]->buffer, out.buffer);
  }
  unknown_op(op);
}

}  // namespace

void bind_verify(nb::module_& m) {
  nb::class_<verify::Comparison>(m, "Comparison",
                                 "What verify.compare and verify.check found: truthy when every element is "
                                 "within its bound; describe() says which are not and by how much.")
      .def_ro("count", &verify::Comparison::count, "Elements compared.")
      .def_ro("failures", &verify::Comparison::failures, "Elements outside their bound.")
      .def_ro("worst_index", &verify::Comparison::worst_index, "The flat index of the element nearest its bound.")
      .def_ro("worst_share", &verify::Comparison::worst_share,
              "The largest |actual - expected| / bound (1 is at the bound; inf past a zero bound).")
      .def_prop_ro("ok", &verify::Comparison::ok, "Whether every element is within its bound.")
      .def_prop_ro(
          "failed_indices",
          [](const verify::Comparison& c) {
            std::vector<std::size_t> at;
            for (const verify::Mismatch& f : c.first_failures) at.push_back(f.index);
            return at;
          },
          "The flat indices of the first few failures.")
      .def("__bool__", &verify::Comparison::ok)
      .def("__repr__", [](const verify::Comparison& c) { return "<Comparison: " + c.describe() + ">"; })
      .def("describe", &verify::Comparison::describe, nb::arg("max_listed") = 5,
           "'3 of 1000 elements outside the bound; first: [17] expected 1.5 got nan (bound 1e-7) ...'.");
  m.def("_verify_compare", &compare_arrays, nb::arg("actual"), nb::arg("expected"), nb::arg("op").none(), nb::arg("rtol"),
        nb::arg("atol"), Release(), "tandem.verify.compare's work (use that).");
  m.def("_verify_check", &check_op, nb::arg("op"), nb::arg("inputs"), nb::arg("out"), Release(),
        "tandem.verify.check's work (use that).");
  m.def(
      "_verify_check_matmul",
      [](const Array& a, const Array& b, const Array& c, bool trans_a, bool trans_b, double alpha) {
        MatmulOptions o;
        o.trans_a = trans_a ? Transpose::yes : Transpose::no;
        o.trans_b = trans_b ? Transpose::yes : Transpose::no;
        o.alpha = alpha;
        return verify::check_matmul(a.matrix("verify.check_matmul"), b.matrix("verify.check_matmul"),
                                    c.matrix("verify.check_matmul"), o);
      },
      nb::arg("a"), nb::arg("b"), nb::arg("c"), nb::arg("trans_a"), nb::arg("trans_b"), nb::arg("alpha"), Release(),
      "tandem.verify.check_matmul's work (use that).");
}

}  // namespace tandem::py
