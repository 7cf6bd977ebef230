// Included by vector_<isa>.cpp, each compiled with its own -m flags, with
//   TANDEM_ISA            namespace and name of this variant (avx512, avx2, generic)
//   TANDEM_VECTOR_BYTES   bytes per vector register (64, 32, 16)
// The softmax row pass in f32: p[c] = exp(x[c] - m) and their sum, in vectors (vexp.inl). As in
// microkernel.inl, nothing here may call an inline function of another header.
#include <cstdint>

#include "softmax_kernel.hpp"

namespace tandem::openmp {
namespace TANDEM_ISA {
namespace {

typedef float vf __attribute__((vector_size(TANDEM_VECTOR_BYTES)));
typedef std::int32_t vi __attribute__((vector_size(TANDEM_VECTOR_BYTES)));
constexpr int kLanes = TANDEM_VECTOR_BYTES / 4;

#include "vexp.inl"

float exp_row(std::int64_t cols, const float* x, float m, float* p) {
  vf acc0{}, acc1{};
  std::int64_t c = 0;
  for (; c + 2 * kLanes <= cols; c += 2 * kLanes) {
    vf a, b;
    __builtin_memcpy(&a, x + c, sizeof(vf));
    __builtin_memcpy(&b, x + c + kLanes, sizeof(vf));
    a = vexp<vf, vi>(a - m);
    b = vexp<vf, vi>(b - m);
    __builtin_memcpy(p + c, &a, sizeof(vf));
    __builtin_memcpy(p + c + kLanes, &b, sizeof(vf));
    acc0 += a;
    acc1 += b;
  }
  for (; c < cols; c += kLanes) {  // the rest, a partial vector padded with -Inf (exp: 0)
    const std::int64_t left = cols - c < kLanes ? cols - c : kLanes;
    vf a = vf{} - __builtin_inff();
    __builtin_memcpy(&a, x + c, static_cast<std::size_t>(left) * 4);
    a = vexp<vf, vi>(a - m);
    __builtin_memcpy(p + c, &a, static_cast<std::size_t>(left) * 4);
    acc0 += a;
  }
  acc0 += acc1;
  float s = 0;
  for (int l = 0; l < kLanes; ++l) s += acc0[l];
  return s;
}

}  // namespace
}  // namespace TANDEM_ISA

#define TANDEM_CAT2(a, b) a##b
#define TANDEM_CAT(a, b) TANDEM_CAT2(a, b)
#define TANDEM_STR2(a) #a
#define TANDEM_STR(a) TANDEM_STR2(a)

SoftmaxKernel TANDEM_CAT(softmax_kernel_, TANDEM_ISA)() { return {TANDEM_STR(TANDEM_ISA), &TANDEM_ISA::exp_row}; }

}  // namespace tandem::openmp
