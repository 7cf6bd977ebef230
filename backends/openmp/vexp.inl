// exp of a vector of f32, for the openmp kernels compiled once per ISA (vector_<isa>.cpp) and
// for the test that measures it. Include it inside an ISA's own (anonymous) namespace: the same
// template compiled with other -m flags must not be merged by the linker.
//
// Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, a polynomial for e^r (Cephes' expf
// coefficients, 1 + r + r^2 P(r)), and 2^n applied as two powers of two, so that results down
// into the subnormals and up to overflow get a single rounding. Against double-precision exp,
// rounded, over every 61st f32 in [-103.9, 88.7] (tests/test_vexp.cpp; every 7th was measured
// once): at most 1 ulp, normal or subnormal, with FMA or without. -Inf, +Inf and NaN behave as
// std::exp does.
// V: a GCC vector of float, I: the vector of int32 with as many lanes.

template <class V, class I>
inline V vexp(V x) {
  const V lo = V{} - 110.0f, hi = V{} + 90.0f;
  V t = x < lo ? lo : x;  // also -Inf; NaN compares false and is restored at the end
  t = t > hi ? hi : t;
  t = x == x ? t : V{};
  const V round_magic = V{} + 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const V n = (t * 1.44269504088896341f + round_magic) - round_magic;
  V r = t - n * 0.693359375f;  // ln2 in two parts: n * 0.693359375 is exact for |n| < 2^9
  r = r - n * -2.12194440e-4f;
  V p = V{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const I ni = __builtin_convertvector(n, I);
  const I n1 = ni >> 1, n2 = ni - n1;  // each within a normal exponent
  const I b1 = (n1 + 127) << 23, b2 = (n2 + 127) << 23;
  V s1, s2;
  __builtin_memcpy(&s1, &b1, sizeof(V));
  __builtin_memcpy(&s2, &b2, sizeof(V));
  const V e = (p * s1) * s2;
  return x == x ? e : x;
}
