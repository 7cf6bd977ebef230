// A kernels file: compiled once per kind of backend by tandem_add_kernels() (CMakeLists.txt,
// docs/kernels.md). Its kernels and functions live in an unnamed namespace, so that the host's,
// nvcc's and clang-HIP's compilations of them never meet at link time; TANDEM_EXPORT makes each
// compilation of a function reachable from the program (examples/user_kernels.cpp).
#include <tandem/kernels.hpp>
namespace g = tandem::gpu;

namespace {

// y = a x + y, a GPU kernel: one element per thread.
TANDEM_KERNEL void saxpy_kernel(unsigned n, float a, const float* x, float* y) {
  const unsigned i = g::block_idx().x * g::block_dim().x + g::thread_idx().x;
  if (i < n) y[i] = a * x[i] + y[i];
}

// The sum of x, a block at a time: shared memory, barriers, a warp's shuffles and an atomic.
TANDEM_KERNEL void sum_kernel(unsigned n, const float* x, float* total) {
  TANDEM_SHARED(float, warp_sums, [1024 / g::kMinWarpSize]);
  const unsigned i = g::block_idx().x * g::block_dim().x + g::thread_idx().x;
  float v = i < n ? x[i] : 0.0f;
  for (unsigned d = g::warp_size() / 2; d > 0; d /= 2) v += g::shfl_down(v, d);
  if (g::lane_id() == 0) warp_sums[g::warp_id()] = v;
  g::sync_threads();
  if (g::thread_rank() == 0) {
    float s = 0;
    for (unsigned w = 0; w < g::block_threads() / g::warp_size(); ++w) s += warp_sums[w];
    g::atomic_add(total, s);
  }
}

void saxpy(tandem::Backend& backend, float a, const tandem::Buffer& x, tandem::Buffer& y) {
  const auto n = static_cast<unsigned>(x.size());
  tandem::launch(backend, {"saxpy", {(n + 255) / 256}, {256}}, saxpy_kernel, n, a, static_cast<const float*>(x.data()),
                 static_cast<float*>(y.data()));
}

void sum(tandem::Backend& backend, const tandem::Buffer& x, tandem::Buffer& total) {
  const auto n = static_cast<unsigned>(x.size());
  total.fill(0.0);
  tandem::launch(backend, {"sum", {(n + 255) / 256}, {256}}, sum_kernel, n, static_cast<const float*>(x.data()),
                 static_cast<float*>(total.data()));
}

// The same without a kernel: a loop body for every element, and a reduction.
double squares(tandem::Backend& backend, const tandem::Buffer& x) {
  const float* p = static_cast<const float*>(x.data());
  return tandem::parallel_reduce(
      backend, x.size(), 0.0, TANDEM_LAMBDA(std::size_t i) { return double(p[i]) * p[i]; });
}

void halve(tandem::Backend& backend, tandem::Buffer& x) {
  float* p = static_cast<float*>(x.data());
  tandem::parallel_for(
      backend, x.size(), TANDEM_LAMBDA(std::size_t i) { p[i] *= 0.5f; });
}

}  // namespace

TANDEM_EXPORT(saxpy);
TANDEM_EXPORT(sum);
TANDEM_EXPORT(squares);
TANDEM_EXPORT(halve);
