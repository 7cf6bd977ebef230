// The simulator's Hopper model against an sm_90 GPU: the boxes of hopper_cases.hpp (edges, every
// swizzle) copied by the GPU's TMA unit must lie in shared memory exactly as the simulator lays
// them out, and wgmma must compute the product from each shared-memory layout, each operand
// K-major or M/N-major, into the fragment layout the simulator gives it (test_sim_hopper.cpp
// checks the same cases there); and the tensor_core tier's wgmma kernels (both tiles, every
// operand layout) must give cuBLAS's products. Built for sm_90a (wgmma exists nowhere else);
// SKIPPED without a CUDA device of compute capability 9.0.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../backends/cuda/tensor_map.hpp"
#include "hopper_cases.hpp"
#include "tandem/tandem.hpp"

namespace {

namespace hb = tandem::test::hopper;

// Why TMA cannot run here, or "".
std::string why_no_tma() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    return "no usable CUDA device here";
  }
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return "the CUDA device's properties cannot be read";
  if (p.major != 9 || p.minor != 0) {
    return "these kernels are built for sm_90a (TMA and wgmma), compute capability 9.0; device 0 (" +
           std::string(p.name) + ") has " + std::to_string(p.major) + "." + std::to_string(p.minor);
  }
  cudaFuncAttributes a{};
  if (cudaFuncGetAttributes(&a, hb::copy_box) != cudaSuccess) {
    cudaGetLastError();
    return "this build has no code for device 0";
  }
  return "";
}

// True, after printing SKIPPED with the reason, where TMA and wgmma cannot run.
bool skipped_here() {
  const std::string why = why_no_tma();
  if (!why.empty()) std::printf("SKIPPED: %s\n", why.c_str());
  return !why.empty();
}

void check(cudaError_t e, const char* what) { REQUIRE_MESSAGE(e == cudaSuccess, what, ": ", cudaGetErrorString(e)); }

TEST_CASE("TMA boxes on the GPU lie as the simulator lays them out: edges and every swizzle") {
  if (skipped_here()) return;
  const auto m = hb::numbered();
  void* src = nullptr;
  unsigned char* out = nullptr;
  check(cudaMalloc(&src, m.size() * 2), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&out), sizeof(hb::BoxTile)), "cudaMalloc");
  check(cudaMemcpy(src, m.data(), m.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  for (const hb::BoxCase& c : hb::box_cases()) {
    const CUtensorMap map = tandem::cuda::make_tensor_map_2d(src, 2, c.width, c.height, hb::kRowBytes, c.box_width,
                                                             c.box_height, c.swizzle);
    std::int32_t x = c.x, y = c.y;
    std::uint32_t bytes = c.bytes();
    check(cudaMemset(out, 0xAB, sizeof(hb::BoxTile)), "cudaMemset");  // a byte not written shows
    void* args[] = {const_cast<CUtensorMap*>(&map), &x, &y, &bytes, &out};
    check(cudaLaunchKernel(reinterpret_cast<const void*>(hb::copy_box), dim3(1), dim3(64), args, 0, nullptr),
          "launching copy_box");
    check(cudaDeviceSynchronize(), "copy_box");
    std::vector<std::uint16_t> box(bytes / 2);
    check(cudaMemcpy(box.data(), out, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    CHECK(hb::check_box(c, box) == "");
  }
  cudaFree(src);
  cudaFree(out);
}

TEST_CASE(
    "wgmma on the GPU computes the 64 x 64 x 64 product from each shared-memory layout, each operand K-major or "
    "M/N-major, as the simulator does") {
  if (skipped_here()) return;
  const hb::Product p = hb::product();
  void *a = nullptr, *b = nullptr;
  float* c = nullptr;
  check(cudaMalloc(&a, p.a.size() * 2), "cudaMalloc");
  check(cudaMalloc(&b, p.b.size() * 2), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&c), p.c.size() * sizeof(float)), "cudaMalloc");
  for (int majors = 0; majors < 4; ++majors) {
    check(cudaMemcpy(a, p.a_rows(majors).data(), p.a.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
    check(cudaMemcpy(b, p.b_rows(majors).data(), p.b.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
    for (tandem::gpu::Swizzle layout : hb::kLayouts) {
      const std::uint32_t kw = hb::box_width(layout);
      const CUtensorMap a_map =
          tandem::cuda::make_tensor_map_2d(a, 2, hb::kTile, hb::kTile, hb::kTile * 2, kw, hb::kTile, layout);
      const CUtensorMap b_map =
          tandem::cuda::make_tensor_map_2d(b, 2, hb::kTile, hb::kTile, hb::kTile * 2, kw, hb::kTile, layout);
      check(cudaMemset(c, 0xFF, p.c.size() * sizeof(float)), "cudaMemset");  // NaN: an output not written shows
      int swizzle = static_cast<int>(layout), how = majors, bug = 0;
      void* args[] = {const_cast<CUtensorMap*>(&a_map), const_cast<CUtensorMap*>(&b_map), &swizzle, &how, &bug, &c};
      check(cudaLaunchKernel(reinterpret_cast<const void*>(hb::wgmma_product), dim3(1), dim3(128), args, 0, nullptr),
            "launching wgmma_product");
      check(cudaDeviceSynchronize(), "wgmma_product");
      std::vector<float> got(p.c.size());
      check(cudaMemcpy(got.data(), c, got.size() * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
      CHECK_MESSAGE(got == p.c, "layout ", swizzle, ", majors ", majors);
    }
  }
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

// The tier's wgmma kernels (both tiles) against cuBLAS on one product, A as am and B as bm: equal
// to the bit, or the CHECK names `what`.
void check_against_cublas(tandem::Backend& be, const tandem::Matrix& am, const tandem::Matrix& bm,
                          tandem::MatmulOptions o, tandem::Buffer& want, tandem::Buffer& got, const std::string& what) {
  const std::int64_t m = o.trans_a == tandem::Transpose::yes ? am.cols : am.rows;
  const std::int64_t n = o.trans_b == tandem::Transpose::yes ? bm.rows : bm.cols;
  o.tier = tandem::MatmulTier::vendor;
  ::unsetenv("TANDEM_GPU_TENSOR_KERNEL");
  tandem::matmul(am, bm, tandem::matrix(want, m, n), o);
  o.tier = tandem::MatmulTier::tensor_core;
  for (const char* kernel : {"wgmma", "wgmma_128"}) {
    ::setenv("TANDEM_GPU_TENSOR_KERNEL", kernel, 1);
    tandem::fill(got, std::nan(""));  // a tile left unwritten shows
    tandem::matmul(am, bm, tandem::matrix(got, m, n), o);
    be.synchronize({});
    CHECK_MESSAGE(got.to_vector<float>() == want.to_vector<float>(), kernel, " at ", what);
  }
}

// A stored rows x cols matrix of small integers (bf16 or f16) with rows 16-byte aligned (ld a
// multiple of 8 elements, as the wgmma kernel's copies need; the padding holds zeros).
tandem::Matrix stored(tandem::Backend& be, std::int64_t rows, std::int64_t cols, tandem::DType type, int salt) {
  const std::int64_t ld = (cols + 7) / 8 * 8;
  std::vector<float> v(rows * ld, 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) v[r * ld + c] = float(int((r * 7 + c * 3 + salt) % 9) - 4);
  }
  return tandem::matrix(tandem::convert(tandem::Buffer::from(be, v), type), rows, cols, ld);
}

TEST_CASE(
    "the tensor_core tier's wgmma kernels on the GPU give cuBLAS's products in bf16 and f16, in every operand layout, "
    "at edges and in bulk") {
  if (skipped_here()) return;
  tandem::Backend& be = tandem::get_backend("cuda");
  struct Restore {
    ~Restore() { ::unsetenv("TANDEM_GPU_TENSOR_KERNEL"); }
  } restore;
  struct Shape {
    std::int64_t m, n, k;
  };
  using tandem::Transpose;
  for (const Shape& s : {Shape{200, 136, 328}, Shape{129, 1, 24}, Shape{1000, 1000, 1000}, Shape{4096, 4096, 4096}}) {
    // Small integers: every sum is exact in f32, so the kernels must agree to the bit. Four
    // products of each shape, A as it is or transposed, B likewise, in bf16 and f16.
    tandem::Buffer want(be, tandem::DType::f32, s.m * s.n), got(be, tandem::DType::f32, s.m * s.n);
    for (const tandem::DType type : {tandem::DType::bf16, tandem::DType::f16}) {
      for (const Transpose ta : {Transpose::no, Transpose::yes}) {
        for (const Transpose tb : {Transpose::yes, Transpose::no}) {
          tandem::MatmulOptions o;
          o.trans_a = ta;
          o.trans_b = tb;
          const auto am = ta == Transpose::yes ? stored(be, s.k, s.m, type, 1) : stored(be, s.m, s.k, type, 1);
          const auto bm = tb == Transpose::yes ? stored(be, s.n, s.k, type, 5) : stored(be, s.k, s.n, type, 5);
          const std::string what = std::to_string(s.m) + " x " + std::to_string(s.n) + " x " + std::to_string(s.k) +
                                   (ta == Transpose::yes ? ", A^T" : ", A") + (tb == Transpose::yes ? ", B^T" : ", B") +
                                   ", " + std::string(tandem::name_of(type));
          try {
            check_against_cublas(be, am, bm, o, want, got, what);
          } catch (const tandem::Unsupported& e) {
            // Only a build without sm_90a code (CMAKE_CUDA_ARCHITECTURES=90) skips; any other
            // refusal of these operands is a failure.
            if (std::string(e.what()).find("needs sm_90a code") == std::string::npos) throw;
            std::printf("SKIPPED: %s\n", e.what());
            return;
          }
        }
      }
    }
  }
}

}  // namespace
