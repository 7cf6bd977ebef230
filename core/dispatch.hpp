// dtype dispatch: calls a templated lambda with the C++ type of a runtime DType. Shared by every
// backend (host and GPU) so that the dtypes an op offers, and the error for the others, agree.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "tandem/dtype.hpp"
#include "tandem/errors.hpp"

namespace tandem::detail {

// A buffer's untyped pointer as the element type a dispatch chose.
template <class T> const T* as(const void* p) { return static_cast<const T*>(p); }
template <class T> T* as(void* p) { return static_cast<T*>(p); }

// Calls f.template operator()<T>() for the C++ type of t, limited to the listed family.
template <class F> decltype(auto) dispatch_float(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f.template operator()<float>();
    case DType::f64: return f.template operator()<double>();
    default: throw DTypeMismatch("dtype " + std::string(name_of(t)) + " is not offered here; use f32 or f64");
  }
}
template <class F> decltype(auto) dispatch_numeric(DType t, F&& f) {
  if (t == DType::i32) return f.template operator()<std::int32_t>();
  return dispatch_float(t, std::forward<F>(f));
}
// The floating types, 16-bit storage types included.
template <class F> decltype(auto) dispatch_real(DType t, F&& f) {
  switch (t) {
    case DType::f16: return f.template operator()<half>();
    case DType::bf16: return f.template operator()<bfloat16>();
    default: return dispatch_float(t, std::forward<F>(f));
  }
}
template <class F> decltype(auto) dispatch_any(DType t, F&& f) {
  switch (t) {
    case DType::f16: return f.template operator()<half>();
    case DType::bf16: return f.template operator()<bfloat16>();
    default: return dispatch_numeric(t, std::forward<F>(f));
  }
}

}  // namespace tandem::detail
