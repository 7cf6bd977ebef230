// tandem's reduction rules as functors for a vendor's device-wide primitives (CUB on cuda,
// rocPRIM on hip), so that their `cub` and `rocprim` variants answer as tandem's own kernels do:
// a NaN anywhere makes min and max NaN, argmax is the first NaN or else the first maximum, i32
// sums wrap (summed as u32), and max and min start from -inf and +inf (the max of [-inf] is -inf).
// Compiled by nvcc or clang -x hip only.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "tandem/op_table.hpp"

namespace tandem::gpu::vendor {

// A value reduction's combine from its row of the op table, as the vendor's binary functor.
template <class Row, class T>
struct Combine {
  __device__ T operator()(const T& a, const T& b) const { return Row::template combine<T>(a, b); }
};
template <class T>
using NanMax = Combine<op::Max, T>;
template <class T>
using NanMin = Combine<op::Min, T>;
// Pair: the vendor's key-value pair (key: the index, value: the element).
template <class Pair>
struct FirstArgMax {
  __device__ Pair operator()(const Pair& a, const Pair& b) const {
    return math::argmax_prefers(a.value, a.key, b.value, b.key) ? b : a;
  }
};
template <class T>
struct Square {
  __device__ T operator()(const T& v) const { return v * v; }
};
template <class T>
struct Plus {
  __device__ T operator()(const T& a, const T& b) const { return a + b; }
};

template <class T>
__global__ void sqrt_in_place(T* v) {
  *v = sqrt(*v);
}
template <class Pair>
__global__ void copy_key(const Pair* pair, std::int32_t* out) {
  *out = static_cast<std::int32_t>(pair->key);
}

// max and min start from their rows' identities: -inf and +inf (the max of [-inf] is -inf).
template <class T>
T lowest() {
  return op::Max::identity<T>();
}
template <class T>
T highest() {
  return op::Min::identity<T>();
}

// i32 sums as u32: wrapping is then defined.
template <class T>
using SumType = std::conditional_t<std::is_same_v<T, std::int32_t>, std::uint32_t, T>;

}  // namespace tandem::gpu::vendor
