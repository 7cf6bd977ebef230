// Elementwise kernels: grid-stride loops over packed 16-byte loads where every pointer is
// aligned, with a scalar tail; bias broadcast and matrix add over 2D grid-stride loops.
#pragma once

#include <cmath>

#include "common.hpp"
#include "tandem/detail/apply_op.hpp"

namespace tandem::gpu::kernels {
inline namespace TANDEM_GPU_ABI {

using math::apply;

// Calls pack_f(base) for each whole 16-byte pack when `packed` (every pointer aligned), then
// element_f(i) for the rest: a grid-stride loop each.
template <class T, class PackF, class ElementF>
TANDEM_DEVICE void grid_stride_packed(std::size_t n, bool packed, PackF pack_f, ElementF element_f) {
  const std::size_t start = global_thread(), stride = global_threads();
  std::size_t done = 0;
  if (packed) {
    constexpr unsigned P = Pack<T>::size;
    const std::size_t packs = n / P;
    for (std::size_t p = start; p < packs; p += stride) pack_f(p * P);
    done = packs * P;
  }
  for (std::size_t i = done + start; i < n; i += stride) element_f(i);
}

template <class T>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void binary_kernel(BinaryOp op, std::size_t n, const T* x, const T* y, T* out,
                                                           bool packed) {
  grid_stride_packed<T>(
      n, packed,
      [&](std::size_t base) {
        const Pack<T> a = load_pack(x + base), b = load_pack(y + base);
        Pack<T> r;
        for (unsigned k = 0; k < Pack<T>::size; ++k) r.v[k] = apply(op, a.v[k], b.v[k]);
        store_pack(out + base, r);
      },
      [&](std::size_t i) { out[i] = apply(op, x[i], y[i]); });
}

template <class T>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void unary_kernel(UnaryOp op, std::size_t n, const T* x, T* out, bool packed) {
  grid_stride_packed<T>(
      n, packed,
      [&](std::size_t base) {
        const Pack<T> a = load_pack(x + base);
        Pack<T> r;
        for (unsigned k = 0; k < Pack<T>::size; ++k) r.v[k] = apply(op, a.v[k]);
        store_pack(out + base, r);
      },
      [&](std::size_t i) { out[i] = apply(op, x[i]); });
}

// y += alpha * x
template <class T>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void axpy_kernel(std::size_t n, T alpha, const T* x, T* y, bool packed) {
  grid_stride_packed<T>(
      n, packed,
      [&](std::size_t base) {
        const Pack<T> a = load_pack(x + base);
        Pack<T> r = load_pack(y + base);
        for (unsigned k = 0; k < Pack<T>::size; ++k) r.v[k] = alpha * a.v[k] + r.v[k];
        store_pack(y + base, r);
      },
      [&](std::size_t i) { y[i] = alpha * x[i] + y[i]; });
}

// out = alpha * x
template <class T>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void scale_kernel(std::size_t n, T alpha, const T* x, T* out, bool packed) {
  grid_stride_packed<T>(
      n, packed,
      [&](std::size_t base) {
        const Pack<T> a = load_pack(x + base);
        Pack<T> r;
        for (unsigned k = 0; k < Pack<T>::size; ++k) r.v[k] = alpha * a.v[k];
        store_pack(out + base, r);
      },
      [&](std::size_t i) { out[i] = alpha * x[i]; });
}

// out = value, for any element type by its bits (U: an unsigned integer of the element's size).
template <class U>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void fill_kernel(std::size_t n, U value, U* out, bool packed) {
  grid_stride_packed<U>(
      n, packed,
      [&](std::size_t base) {
        Pack<U> r;
        for (unsigned k = 0; k < Pack<U>::size; ++k) r.v[k] = value;
        store_pack(out + base, r);
      },
      [&](std::size_t i) { out[i] = value; });
}

// Blocks of 2D elementwise kernels: kCols2d threads along columns (coalesced) x kRows2d rows.
inline constexpr unsigned kCols2d = 32, kRows2d = 8;

// f(r, c) over a rows x cols grid-stride loop: threads along x walk columns (coalesced).
template <class F>
TANDEM_DEVICE void grid_stride_2d(std::int64_t rows, std::int64_t cols, F f) {
  for (std::int64_t r = std::int64_t(block_idx().y) * block_dim().y + thread_idx().y; r < rows;
       r += std::int64_t(grid_dim().y) * block_dim().y) {
    for (std::int64_t c = std::int64_t(block_idx().x) * block_dim().x + thread_idx().x; c < cols;
         c += std::int64_t(grid_dim().x) * block_dim().x) {
      f(r, c);
    }
  }
}

template <class T>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void add_row_vector_kernel(std::int64_t rows, std::int64_t cols, const T* x,
                                                                   std::int64_t ldx, const T* bias, T* out,
                                                                   std::int64_t ldo) {
  grid_stride_2d(rows, cols, [&](std::int64_t r, std::int64_t c) { out[r * ldo + c] = x[r * ldx + c] + bias[c]; });
}

// out row r = x row index[r]; rows whose index is out of range get `missing` (NaN or -1 bits).
// T is an unsigned type of the element's size: the copy moves bits.
template <class T>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void gather_rows_kernel(std::int64_t rows, std::int64_t cols,
                                                                const std::int32_t* index, std::int64_t x_rows,
                                                                const T* x, std::int64_t ldx, T* out, std::int64_t ldo,
                                                                T missing) {
  grid_stride_2d(rows, cols, [&](std::int64_t r, std::int64_t c) {
    const std::int64_t src = index[r];
    out[r * ldo + c] = src >= 0 && src < x_rows ? x[src * ldx + c] : missing;
  });
}

// One fused Adam step (see AdamParams): one pass over w, g, m, v.
template <class T>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void adam_step_kernel(std::size_t n, T b1, T b2, T step, T inv_c2, T eps,
                                                              T keep, T* w, const T* g, T* m, T* v) {
  for (std::size_t i = global_thread(); i < n; i += global_threads()) {
    const T gi = g[i];
    const T mi = b1 * m[i] + (T(1) - b1) * gi;
    const T vi = b2 * v[i] + (T(1) - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] = keep * w[i] - step * mi / (std::sqrt(vi * inv_c2) + eps);
  }
}

// out[i] = x[i] converted from S to D.
template <class S, class D>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void convert_kernel(std::size_t n, const S* x, D* out) {
  for (std::size_t i = global_thread(); i < n; i += global_threads()) out[i] = math::convert_value<D>(x[i]);
}

// out = act(x + bias), and z = x + bias when z is not null: a layer's epilogue in one pass.
template <class T>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void bias_activation_kernel(std::int64_t rows, std::int64_t cols, const T* x,
                                                                    std::int64_t ldx, const T* bias, UnaryOp act,
                                                                    T* z, std::int64_t ldz, T* out, std::int64_t ldo) {
  grid_stride_2d(rows, cols, [&](std::int64_t r, std::int64_t c) {
    const T v = x[r * ldx + c] + bias[c];
    if (z != nullptr) z[r * ldz + c] = v;
    out[r * ldo + c] = apply(act, v);
  });
}

// matrix_add of matrices stored without gaps (every leading dimension = cols): one flat pass
// over rows x cols elements in packs, like binary_kernel (a 2D loop reads 4 bytes at a time).
template <class T>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void scaled_add_kernel(std::size_t n, T alpha, const T* a, T beta, const T* b,
                                                               T* out, bool packed) {
  grid_stride_packed<T>(
      n, packed,
      [&](std::size_t base) {
        const Pack<T> x = load_pack(a + base), y = load_pack(b + base);
        Pack<T> r;
        for (unsigned k = 0; k < Pack<T>::size; ++k) r.v[k] = alpha * x.v[k] + beta * y.v[k];
        store_pack(out + base, r);
      },
      [&](std::size_t i) { out[i] = alpha * a[i] + beta * b[i]; });
}

template <class T>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void matrix_add_kernel(std::int64_t rows, std::int64_t cols, T alpha,
                                                               const T* a, std::int64_t lda, T beta, const T* b,
                                                               std::int64_t ldb, T* out, std::int64_t ldc) {
  grid_stride_2d(rows, cols, [&](std::int64_t r, std::int64_t c) {
    out[r * ldc + c] = alpha * a[r * lda + c] + beta * b[r * ldb + c];
  });
}

// out (cols, rows) = a (rows, cols)^T through a 32 x 33 shared tile: reads and writes are both
// coalesced, and the extra column puts a tile column in 32 different banks. Block (32, 8); U is
// an unsigned integer of the element's size (a transpose moves bits).
inline constexpr unsigned kTransposeTile = 32;
inline constexpr unsigned kTransposeRows = 8;
template <class U>
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(256) void transpose_kernel(std::int64_t rows, std::int64_t cols, const U* a,
                                                              std::int64_t lda, U* out, std::int64_t ldo) {
  constexpr unsigned T = kTransposeTile;
  TANDEM_SHARED(U, tile, [T][T + 1]);
  const unsigned tx = thread_idx().x, ty = thread_idx().y;
  const std::int64_t tiles_r = (rows + T - 1) / T, tiles_c = (cols + T - 1) / T;
  for (std::int64_t br = block_idx().y; br < tiles_r; br += grid_dim().y) {
    for (std::int64_t bc = block_idx().x; bc < tiles_c; bc += grid_dim().x) {
      const std::int64_t r0 = br * T, c0 = bc * T;
      for (unsigned j = ty; j < T; j += kTransposeRows) {
        if (r0 + j < rows && c0 + tx < cols) tile[j][tx] = a[(r0 + j) * lda + c0 + tx];
      }
      sync_threads();
      for (unsigned j = ty; j < T; j += kTransposeRows) {
        if (c0 + j < cols && r0 + tx < rows) out[(c0 + j) * ldo + r0 + tx] = tile[tx][j];
      }
      sync_threads();
    }
  }
}

}  // namespace TANDEM_GPU_ABI
}  // namespace tandem::gpu::kernels
