// Fused, numerically stable softmax + cross-entropy: one block per row (grid-stride over rows);
// the row's max and the sum of exp(x - max) are block reductions, so each row is read three
// times and written once. MSE is a reduction (reduce.hpp, SquaredDifferences with Finish::mean).
#pragma once

#include <cmath>

#include "reduce.hpp"

namespace tandem::gpu::kernels {
inline namespace TANDEM_GPU_ABI {

template <class T>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void softmax_cross_entropy_kernel(std::int64_t rows, std::int64_t cols,
                                                                          const T* logits, std::int64_t ld_logits,
                                                                          const std::int32_t* labels, T* probs,
                                                                          std::int64_t ld_probs, T* losses) {
  for (std::int64_t r = block_idx().x; r < rows; r += grid_dim().x) {
    const T* x = logits + r * ld_logits;
    T* p = probs + r * ld_probs;
    T m = MaxOp<T>::identity();
    for (std::int64_t c = thread_rank(); c < cols; c += block_threads()) m = math::nan_max(m, x[c]);
    m = block_all_reduce<MaxOp<T>>(m);
    T s = 0;
    for (std::int64_t c = thread_rank(); c < cols; c += block_threads()) s += std::exp(x[c] - m);
    s = block_all_reduce<SumOp<T>>(s);
    for (std::int64_t c = thread_rank(); c < cols; c += block_threads()) p[c] = std::exp(x[c] - m) / s;
    if (thread_rank() == 0) {
      const std::int32_t label = labels[r];
      losses[r] = (label >= 0 && label < cols) ? std::log(s) - (x[label] - m) : quiet_nan<T>();
    }
  }
}

}  // namespace TANDEM_GPU_ABI
}  // namespace tandem::gpu::kernels
