// Helpers every kernel file uses: grid-stride indices, conversions from storage types, packed
// (16-byte) loads and stores.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

#include "tandem/detail/scalar_math.hpp"
#include "tandem/dtype.hpp"
#include "tandem/gpu/kernel_api.hpp"

namespace tandem::gpu::kernels {
inline namespace TANDEM_GPU_ABI {

// Threads per block for one-dimensional kernels: a multiple of every warp width.
inline constexpr unsigned kBlock = 256;

TANDEM_DEVICE std::size_t global_thread() { return std::size_t(block_idx().x) * block_dim().x + thread_idx().x; }
TANDEM_DEVICE std::size_t global_threads() { return std::size_t(grid_dim().x) * block_dim().x; }

// A storage element to the compute type C.
template <class C, class T>
TANDEM_DEVICE C to_compute(T v) {
  if constexpr (std::is_same_v<T, half>) {
    return C(half::to_float(v.bits));
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    return C(bfloat16::to_float(v.bits));
  } else {
    return C(v);
  }
}

// 16 bytes of T, loaded or stored at once where the address is 16-byte aligned.
template <class T>
struct alignas(16) Pack {
  static constexpr unsigned size = 16 / sizeof(T);
  T v[size];
};
template <class T>
TANDEM_DEVICE Pack<T> load_pack(const T* p) {
#if defined(TANDEM_GPU_COMPILER)
  return *reinterpret_cast<const Pack<T>*>(p);
#else
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) sim::misaligned(p, 16, "load_pack");
  Pack<T> out;
  std::memcpy(&out, p, sizeof out);
  return out;
#endif
}
template <class T>
TANDEM_DEVICE void store_pack(T* p, const Pack<T>& v) {
#if defined(TANDEM_GPU_COMPILER)
  *reinterpret_cast<Pack<T>*>(p) = v;
#else
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) sim::misaligned(p, 16, "store_pack");
  std::memcpy(p, &v, sizeof v);
#endif
}

template <class T>
TANDEM_DEVICE T lowest() {
  if constexpr (std::numeric_limits<T>::has_infinity) {
    return -std::numeric_limits<T>::infinity();
  } else {
    return std::numeric_limits<T>::lowest();
  }
}
template <class T>
TANDEM_DEVICE T highest() {
  if constexpr (std::numeric_limits<T>::has_infinity) {
    return std::numeric_limits<T>::infinity();
  } else {
    return std::numeric_limits<T>::max();
  }
}
template <class T>
TANDEM_DEVICE T quiet_nan() {
  return std::numeric_limits<T>::quiet_NaN();
}

// Addition as the primitives define it: integers wrap modulo 2^32.
template <class T>
TANDEM_DEVICE T plus(T a, T b) {
  if constexpr (std::is_same_v<T, std::int32_t>) {
    return math::wrap_add(a, b);
  } else {
    return a + b;
  }
}

}  // namespace TANDEM_GPU_ABI
}  // namespace tandem::gpu::kernels
