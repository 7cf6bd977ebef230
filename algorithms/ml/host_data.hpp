// Moving host data (float64 vectors) to and from a backend in a compute type, for the composite
// algorithms (regression, MLP).
#pragma once

#include <span>
#include <vector>

#include "tandem/buffer.hpp"
#include "tandem/errors.hpp"

namespace tandem::ml::detail {

// A buffer of values.size() elements of dtype (f32 or f64) holding values.
inline Buffer to_device(Backend& be, std::span<const double> values, DType dtype, Queue q = {}) {
  Buffer b(be, dtype, values.size());
  if (dtype == DType::f64) {
    b.upload(values, q);
  } else if (dtype == DType::f32) {
    const std::vector<float> f(values.begin(), values.end());
    b.upload(std::span<const float>(f), q);
    be.synchronize(q);  // f is about to go
  } else {
    throw DTypeMismatch("the compute type must be f32 or f64, not " + std::string(name_of(dtype)));
  }
  return b;
}

// The buffer's values (f32 or f64) as doubles.
inline std::vector<double> to_host(const Buffer& b) {
  if (b.dtype() == DType::f64) return b.to_vector<double>();
  const std::vector<float> f = b.to_vector<float>();
  return {f.begin(), f.end()};
}

inline double to_scalar(const Buffer& b) { return to_host(b.slice(0, 1))[0]; }

}  // namespace tandem::ml::detail
