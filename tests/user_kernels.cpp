// The kernels of tests/test_kernels.cpp: a kernels file, compiled by tandem_add_kernels() for the
// host and for cuda and hip where tandem has them (tests/CMakeLists.txt), so that the matrix runs
// the same source on every backend.
#include <tandem/kernels.hpp>
namespace g = tandem::gpu;

namespace {

constexpr unsigned kBlock = 256;

// Per block: the inclusive scan of its elements (shared memory, a barrier per step), its total
// added to *total, and its count of positive elements through ballots added to *positives.
TANDEM_KERNEL TANDEM_LAUNCH_BOUNDS(kBlock) void block_scan_kernel(unsigned n, const float* x, float* out, float* total,
                                                                  int* positives) {
  TANDEM_SHARED(float, buf, [2][kBlock]);
  const unsigned t = g::thread_idx().x, i = g::block_idx().x * kBlock + t;
  const float v = i < n ? x[i] : 0.0f;
  buf[0][t] = v;
  unsigned from = 0;
  g::sync_threads();
  for (unsigned d = 1; d < kBlock; d *= 2) {
    buf[1 - from][t] = t >= d ? buf[from][t] + buf[from][t - d] : buf[from][t];
    from = 1 - from;
    g::sync_threads();
  }
  if (i < n) out[i] = buf[from][t];
  int count = 0;
  for (g::lane_mask m = g::ballot(v > 0); m != 0; m &= m - 1) ++count;
  if (g::lane_id() == 0) g::atomic_add(positives, count);
  if (t == kBlock - 1) g::atomic_add(total, buf[from][t]);
}

// out = the rows x cols matrix a transposed, through a 16 x 16 tile in shared memory (2D blocks
// and grid); the tile's extra column keeps a GPU's columns out of one shared-memory bank.
TANDEM_KERNEL void transpose_kernel(unsigned rows, unsigned cols, const float* a, float* out) {
  TANDEM_SHARED(float, tile, [16][17]);
  const g::Dim3 b = g::block_idx(), t = g::thread_idx();
  unsigned r = b.y * 16 + t.y, c = b.x * 16 + t.x;
  if (r < rows && c < cols) tile[t.y][t.x] = a[r * cols + c];
  g::sync_threads();
  r = b.x * 16 + t.y;  // row of the output: a column of a
  c = b.y * 16 + t.x;
  if (r < cols && c < rows) out[r * rows + c] = tile[t.x][t.y];
}

void block_scan(tandem::Backend& backend, const tandem::Buffer& x, tandem::Buffer& out, tandem::Buffer& total,
                tandem::Buffer& positives) {
  const auto n = static_cast<unsigned>(x.size());
  tandem::launch(backend, {"block_scan", {(n + kBlock - 1) / kBlock}, {kBlock}}, block_scan_kernel, n,
                 static_cast<const float*>(x.data()), static_cast<float*>(out.data()),
                 static_cast<float*>(total.data()), static_cast<int*>(positives.data()));
}

void transpose_tiled(tandem::Backend& backend, unsigned rows, unsigned cols, const tandem::Buffer& a,
                     tandem::Buffer& out) {
  tandem::launch(backend, {"transpose", {(cols + 15) / 16, (rows + 15) / 16}, {16, 16}}, transpose_kernel, rows, cols,
                 static_cast<const float*>(a.data()), static_cast<float*>(out.data()));
}

// out[i] = 3 x[i] + 1, and the sum, smallest and largest of x (parallel_for, parallel_reduce).
void affine(tandem::Backend& backend, const tandem::Buffer& x, tandem::Buffer& out) {
  const float* p = static_cast<const float*>(x.data());
  float* q = static_cast<float*>(out.data());
  tandem::parallel_for(
      backend, x.size(), TANDEM_LAMBDA(std::size_t i) { q[i] = 3 * p[i] + 1; });
}
double sum_of(tandem::Backend& backend, const tandem::Buffer& x, std::size_t n) {
  const float* p = static_cast<const float*>(x.data());
  return tandem::parallel_reduce(
      backend, n, 0.0, TANDEM_LAMBDA(std::size_t i) { return double(p[i]); });
}
float smallest(tandem::Backend& backend, const tandem::Buffer& x) {
  const float* p = static_cast<const float*>(x.data());
  return tandem::parallel_reduce(
      backend, x.size(), 1e30f, TANDEM_LAMBDA(std::size_t i) { return p[i]; }, tandem::Min{});
}
float largest(tandem::Backend& backend, const tandem::Buffer& x) {
  const float* p = static_cast<const float*>(x.data());
  return tandem::parallel_reduce(
      backend, x.size(), -1e30f, TANDEM_LAMBDA(std::size_t i) { return p[i]; }, tandem::Max{});
}

}  // namespace

TANDEM_EXPORT(block_scan);
TANDEM_EXPORT(transpose_tiled);
TANDEM_EXPORT(affine);
TANDEM_EXPORT(sum_of);
TANDEM_EXPORT(smallest);
TANDEM_EXPORT(largest);
