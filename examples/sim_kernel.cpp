// Your own GPU kernel, run on the CPU by the simulator (README, "The GPU simulator").
#include <cstdio>
#include <tandem/gpu/kernel_api.hpp>
#include <tandem/tandem.hpp>
#include <vector>
namespace g = tandem::gpu;

TANDEM_KERNEL void scale(int n, float a, float* x) {
  for (unsigned i = g::block_idx().x * g::block_dim().x + g::thread_idx().x; i < unsigned(n);
       i += g::grid_dim().x * g::block_dim().x)
    x[i] *= a;
}

int main() {
  tandem::Backend& sim = tandem::get_backend("sim");
  tandem::Buffer x(sim, tandem::DType::f32, 1000);
  tandem::fill(x, 1.0);
  tandem::sim::launch(sim, {"scale", /*grid*/ {4, 1, 1}, /*block*/ {256, 1, 1}}, scale, 1000, 2.0f,
                      static_cast<float*>(x.data()));
  const std::vector<float> v = x.to_vector<float>();
  std::printf("x[0] = %g, x[999] = %g, sum = %g\n", v[0], v[999], tandem::sum(x));
  return v[0] == 2.0f && v[999] == 2.0f ? 0 : 1;
}
