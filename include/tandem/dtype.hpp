// Element types. f16 and bf16 are storage types (matmul inputs); arithmetic happens in f32.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tandem/detail/portability.hpp"

namespace tandem {

enum class DType { f16, bf16, f32, f64, i32 };

// IEEE 754 binary16, stored as bits; converts to and from float with round-to-nearest-even.
struct half {
  std::uint16_t bits = 0;
  half() = default;
  TANDEM_HOST_DEVICE explicit half(float f) : bits(from_float(f)) {}
  TANDEM_HOST_DEVICE operator float() const { return to_float(bits); }

  TANDEM_HOST_DEVICE static std::uint16_t from_float(float f) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    const std::uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) {  // Inf or NaN; keep NaN quiet and non-zero
      return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    }
    if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to Inf
    if (abs < 0x38800000u) {  // result is subnormal or zero in binary16
      if (abs < 0x33000000u) return static_cast<std::uint16_t>(sign);  // below half the smallest
      const std::uint32_t exponent = abs >> 23;
      const std::uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
      const std::uint32_t shift = 126u - exponent;  // 14..24
      std::uint32_t result = mantissa >> shift;
      const std::uint32_t rest = mantissa & ((1u << shift) - 1u);
      const std::uint32_t halfway = 1u << (shift - 1u);
      if (rest > halfway || (rest == halfway && (result & 1u))) ++result;
      return static_cast<std::uint16_t>(sign | result);
    }
    std::uint32_t result = ((abs - 0x38000000u) >> 13);  // rebias exponent 127 -> 15
    const std::uint32_t rest = abs & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;
    return static_cast<std::uint16_t>(sign | result);
  }

  TANDEM_HOST_DEVICE static float to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1fu;
    std::uint32_t mantissa = h & 0x3ffu;
    std::uint32_t bits;
    if (exponent == 0x1fu) {
      bits = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent != 0) {
      bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      std::uint32_t e = 113u;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --e;
      }
      bits = sign | (e << 23) | ((mantissa & 0x3ffu) << 13);
    }
    return std::bit_cast<float>(bits);
  }
};

// bfloat16: the upper half of a float, rounded to nearest even.
struct bfloat16 {
  std::uint16_t bits = 0;
  bfloat16() = default;
  TANDEM_HOST_DEVICE explicit bfloat16(float f) : bits(from_float(f)) {}
  TANDEM_HOST_DEVICE operator float() const { return to_float(bits); }

  TANDEM_HOST_DEVICE static std::uint16_t from_float(float f) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
    const std::uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return static_cast<std::uint16_t>((x + rounding) >> 16);
  }
  TANDEM_HOST_DEVICE static float to_float(std::uint16_t b) {
    return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
  }
};

// Size in bytes of one element.
constexpr std::size_t size_of(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16: return 2;
    case DType::f32:
    case DType::i32: return 4;
    case DType::f64: return 8;
  }
  return 0;
}

constexpr std::string_view name_of(DType t) {
  switch (t) {
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
  }
  return "?";
}

template <class T> struct dtype_of;
template <> struct dtype_of<half> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::i32; };
template <class T> inline constexpr DType dtype_of_v = dtype_of<T>::value;

// Parses "f32", "f64", ...; throws InvalidArgument for anything else.
DType parse_dtype(std::string_view name);

}  // namespace tandem
