// The simulator's model of Hopper's mbarriers and TMA copies (backends/sim/sim_hopper.hpp): the
// box layouts a TMA copy writes (each swizzle, edges), a producer/consumer pipeline over stages
// that is exact under every seed tried on both schedulers, and the same pipeline with a bug
// planted (a missing wait, a stage refilled before its readers are done, the wrong swizzle), which
// must fail; misuse of mbarriers and copies fails with a message that names it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "../backends/gpu/kernels/matmul_wgmma.hpp"
#include "hopper_cases.hpp"
#include "tandem/gpu/kernel_api.hpp"
#include "tandem/tandem.hpp"

namespace {

using namespace tandem;
namespace g = tandem::gpu;
namespace k = tandem::gpu::kernels;

Backend& sim_backend() { return get_backend("sim"); }

// ---- one box ----

namespace hb = tandem::test::hopper;

// The box the kernel wrote, as 16-bit elements.
std::vector<std::uint16_t> box_of(const k::TensorMap& map, std::int32_t x, std::int32_t y) {
  Backend& be = sim_backend();
  const std::uint32_t bytes = map.box_width * map.box_height * map.elem_bytes;
  Buffer out(be, DType::i32, (bytes + 3) / 4);
  sim::launch(be, {"copy_box", {1, 1, 1}, {64, 1, 1}}, hb::copy_box, map, x, y, bytes,
              static_cast<unsigned char*>(out.data()));
  std::vector<std::uint16_t> box(bytes / 2);
  out.download_bytes(box.data(), bytes);
  return box;
}

struct Source {
  Buffer buffer;
  const std::uint16_t* data;
};
Source source() {
  const auto m = hb::numbered();
  Buffer src(sim_backend(), DType::bf16, m.size());  // 16-bit elements, moved as bits
  src.upload_bytes(m.data(), m.size() * 2);
  const auto* p = static_cast<const std::uint16_t*>(src.data());
  return {std::move(src), p};
}

TEST_CASE(
    "TMA boxes: row by row, zeros past the tensor's edges, each swizzle's chunk order (the cases an sm_90 GPU "
    "checks)") {
  const Source src = source();
  for (const hb::BoxCase& c : hb::box_cases()) {
    const auto map =
        sim::make_tensor_map_2d(src.data, 2, c.width, c.height, hb::kRowBytes, c.box_width, c.box_height, c.swizzle);
    CHECK(hb::check_box(c, box_of(map, c.x, c.y)) == "");
  }
}

TEST_CASE("swizzles, at literal places: chunk j of 128-byte line L lands at chunk j xor (L mod 8, 4 or 2)") {
  const Source src = source();
  const auto* p = src.data;
  // 128 bytes: row 1's first element is in chunk 1 of row 1 (byte 144), row 7's last (chunk 7,
  // byte 14 of it) in chunk 0 of row 7. 64 bytes (two rows a line): rows 2 and 3 are line 1, their
  // chunk 0 moves to chunk 1. 32 bytes (four rows a line): row 4's chunks 0 and 1 swap.
  const auto b128 = box_of(sim::make_tensor_map_2d(p, 2, 64, 16, 128, 64, 8, g::Swizzle::bytes128), 0, 0);
  CHECK(b128[0] == 0);
  CHECK(b128[(128 + 16) / 2] == 1 * 256 + 0);
  CHECK(b128[(7 * 128 + 14) / 2] == 7 * 256 + 63);
  const auto b64 = box_of(sim::make_tensor_map_2d(p, 2, 64, 16, 128, 32, 8, g::Swizzle::bytes64), 0, 0);
  CHECK(b64[(2 * 64 + 16) / 2] == 2 * 256 + 0);
  CHECK(b64[(3 * 64 + 16) / 2] == 3 * 256 + 0);
  CHECK(b64[(1 * 64 + 16) / 2] == 1 * 256 + 8);  // line 0: in place
  const auto b32 = box_of(sim::make_tensor_map_2d(p, 2, 64, 16, 128, 16, 8, g::Swizzle::bytes32), 0, 0);
  CHECK(b32[(4 * 32 + 16) / 2] == 4 * 256 + 0);
  CHECK(b32[(4 * 32) / 2] == 4 * 256 + 8);
}

TEST_CASE("tensor maps refuse what cuTensorMapEncodeTiled refuses") {
  Backend& be = sim_backend();
  Buffer src(be, DType::bf16, 4096);
  const auto* p = static_cast<const std::uint16_t*>(src.data());
  const auto refused = [&](auto&& make, const char* words) {
    CHECK_THROWS_WITH_AS(make(), doctest::Contains(words), InvalidArgument);
  };
  refused([&] { return sim::make_tensor_map_2d(p + 1, 2, 64, 16, 128, 64, 8, g::Swizzle::none); },
          "multiple of 16 bytes");
  refused([&] { return sim::make_tensor_map_2d(p, 2, 64, 16, 120, 8, 8, g::Swizzle::none); }, "row stride");
  refused([&] { return sim::make_tensor_map_2d(p, 2, 64, 16, 128, 4, 8, g::Swizzle::none); }, "box row of 8 bytes");
  refused([&] { return sim::make_tensor_map_2d(p, 2, 64, 16, 128, 64, 8, g::Swizzle::bytes64); },
          "at most the swizzle's span");
  refused([&] { return sim::make_tensor_map_2d(p, 2, 64, 16, 128, 64, 300, g::Swizzle::none); }, "1 to 256");
  refused([&] { return sim::make_tensor_map_2d(p, 3, 64, 16, 192, 16, 8, g::Swizzle::none); }, "1, 2, 4 or 8");
}

// ---- a pipeline of stages ----

constexpr unsigned kCols = 32;      // floats per row: one 128-byte box row
constexpr unsigned kTileRows = 16;  // rows per tile
constexpr unsigned kStages = 3;
constexpr unsigned kConsumerWarps = 2;  // each sums kTileRows / 2 rows of every tile

struct alignas(1024) Stages {
  float tile[kStages][kTileRows][kCols];
};

enum class Bug : int { none, no_full_wait, no_empty_wait, wrong_swizzle };

// Warp 0's lane 0 fills the stages with TMA copies of the matrix's tiles; warps 1 and 2 add up
// their rows of each tile column by column (lane = column), then free the stage. sums[c] gets
// column c's total from each consumer warp.
TANDEM_KERNEL void pipeline_sums(TANDEM_GRID_CONSTANT const k::TensorMap map, unsigned tiles, int bug, float* sums) {
  TANDEM_SHARED(Stages, stages);
  TANDEM_SHARED(k::MBarrier, full, [kStages]);
  TANDEM_SHARED(k::MBarrier, empty, [kStages]);
  const auto b = static_cast<Bug>(bug);
  const unsigned warp = g::warp_id(), lane = g::lane_id();
  if (g::thread_rank() == 0) {
    for (unsigned s = 0; s < kStages; ++s) {
      k::mbarrier_init(&full[s], 1);
      k::mbarrier_init(&empty[s], kConsumerWarps);
    }
    k::fence_mbarrier_init();
  }
  g::sync_threads();
  if (warp == 0) {
    if (lane == 0) {
      for (unsigned t = 0; t < tiles; ++t) {
        const unsigned s = t % kStages, phase = (t / kStages) % 2;
        if (b != Bug::no_empty_wait) k::mbarrier_wait_parity(&empty[s], phase ^ 1u);
        k::mbarrier_arrive_expect_tx(&full[s], kTileRows * kCols * sizeof(float));
        k::tma_load_2d(stages.tile[s], &map, 0, static_cast<std::int32_t>(t * kTileRows), &full[s]);
      }
    }
    return;
  }
  const unsigned first = (warp - 1) * (kTileRows / kConsumerWarps);
  const g::Swizzle read_as = b == Bug::wrong_swizzle ? g::Swizzle::none : g::Swizzle::bytes128;
  float sum = 0;
  for (unsigned t = 0; t < tiles; ++t) {
    const unsigned s = t % kStages, phase = (t / kStages) % 2;
    if (b != Bug::no_full_wait) k::mbarrier_wait_parity(&full[s], phase);
    const auto* base = reinterpret_cast<const unsigned char*>(stages.tile[s]);
    const auto offset = static_cast<std::uint32_t>(base - reinterpret_cast<const unsigned char*>(&stages));
    for (unsigned r = first; r < first + kTileRows / kConsumerWarps; ++r) {
      // The stages start at a multiple of 1024 bytes, so the swizzle's pattern is the tile's own.
      const std::uint32_t at = g::swizzled(offset + (r * kCols + lane) * 4, read_as) - offset;
      float v;
      std::memcpy(&v, base + at, 4);
      sum += v;
    }
    g::sync_warp();
    if (lane == 0) k::mbarrier_arrive(&empty[s]);
  }
  sums[(warp - 1) * kCols + lane] = sum;
}

struct PipelineRun {
  bool exact = false;
  std::string error;  // what the simulator reported, if it did
};

PipelineRun run_pipeline(Bug bug, bool adversarial, std::uint64_t seed, unsigned tiles = 7) {
  Backend& be = sim_backend();
  const unsigned rows = tiles * kTileRows;
  std::vector<float> m(rows * kCols);
  std::vector<float> expect(kConsumerWarps * kCols, 0.0f);
  for (unsigned r = 0; r < rows; ++r) {
    for (unsigned c = 0; c < kCols; ++c) {
      m[r * kCols + c] = static_cast<float>((r * 7 + c * 3) % 17) - 8.0f;  // small integers: sums are exact
      expect[((r % kTileRows) / (kTileRows / kConsumerWarps)) * kCols + c] += m[r * kCols + c];
    }
  }
  Buffer src(be, DType::f32, m.size());
  src.upload(m);
  Buffer sums(be, DType::f32, expect.size());
  const auto map =
      sim::make_tensor_map_2d(src.data(), 4, kCols, rows, kCols * 4, kCols, kTileRows, g::Swizzle::bytes128);
  const g::LaunchConfig config{"pipeline_sums", {1, 1, 1}, {32 * (1 + kConsumerWarps), 1, 1}};
  PipelineRun run;
  try {
    if (adversarial) {
      sim::AdversaryOptions o;
      o.seed = seed;
      sim::launch_adversarial(be, o, config, pipeline_sums, map, tiles, static_cast<int>(bug),
                              static_cast<float*>(sums.data()));
    } else {
      sim::launch(be, config, pipeline_sums, map, tiles, static_cast<int>(bug), static_cast<float*>(sums.data()));
    }
  } catch (const DeviceError& e) {
    run.error = e.what();
    return run;
  }
  run.exact = sums.to_vector<float>() == expect;
  return run;
}

TEST_CASE("a TMA pipeline over three stages is exact under every seed, pooled and adversarial") {
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    for (bool adversarial : {false, true}) {
      const PipelineRun run = run_pipeline(Bug::none, adversarial, seed);
      CHECK_MESSAGE(run.error.empty(), run.error);
      CHECK_MESSAGE(run.exact, "seed ", seed, std::string(adversarial ? " (adversary)" : ""));
    }
  }
}

TEST_CASE("the pipeline with a bug planted fails: no wait for the copy, a stage refilled early, the wrong swizzle") {
  for (Bug bug : {Bug::no_full_wait, Bug::no_empty_wait, Bug::wrong_swizzle}) {
    for (bool adversarial : {false, true}) {
      unsigned caught = 0;
      for (std::uint64_t seed = 1; seed <= 24; ++seed) {
        const PipelineRun run = run_pipeline(bug, adversarial, seed);
        // Caught: a wrong sum, or the model naming the misuse (an arrival beyond its count).
        const bool named = run.error.find("mbarrier") != std::string::npos;
        CHECK_MESSAGE((run.error.empty() || named), run.error);
        caught += run.exact ? 0 : 1;
      }
      MESSAGE("bug ", static_cast<int>(bug), adversarial ? " adv" : " pool", " caught ", caught);
      CHECK_MESSAGE(caught > 0, "bug ", static_cast<int>(bug), std::string(adversarial ? " (adversary)" : ""),
                    " never caught");
    }
  }
}

// ---- wgmma ----

struct ProductRun {
  std::vector<float> c;
  std::string error;
};

ProductRun run_product(g::Swizzle layout, int majors, hb::WgmmaBug bug, bool adversarial = false,
                       std::uint64_t seed = 1) {
  Backend& be = sim_backend();
  const hb::Product p = hb::product();
  const auto& a_rows = p.a_rows(majors);
  const auto& b_rows = p.b_rows(majors);
  Buffer a(be, DType::bf16, a_rows.size()), b(be, DType::bf16, b_rows.size()), c(be, DType::f32, p.c.size());
  a.upload_bytes(a_rows.data(), a_rows.size() * 2);
  b.upload_bytes(b_rows.data(), b_rows.size() * 2);
  const std::uint32_t kw = hb::box_width(layout);
  const auto a_map = sim::make_tensor_map_2d(a.data(), 2, hb::kTile, hb::kTile, hb::kTile * 2, kw, hb::kTile, layout);
  const auto b_map = sim::make_tensor_map_2d(b.data(), 2, hb::kTile, hb::kTile, hb::kTile * 2, kw, hb::kTile, layout);
  const g::LaunchConfig config{"wgmma_product", {1, 1, 1}, {128, 1, 1}};
  const int swizzle = static_cast<int>(layout), planted = static_cast<int>(bug);
  ProductRun run;
  try {
    if (adversarial) {
      sim::AdversaryOptions o;
      o.seed = seed;
      sim::launch_adversarial(be, o, config, hb::wgmma_product, a_map, b_map, swizzle, majors, planted,
                              static_cast<float*>(c.data()));
    } else {
      sim::launch(be, config, hb::wgmma_product, a_map, b_map, swizzle, majors, planted, static_cast<float*>(c.data()));
    }
  } catch (const DeviceError& e) {
    run.error = e.what();
    return run;
  }
  run.c = c.to_vector<float>();
  return run;
}

TEST_CASE(
    "wgmma: a 64 x 64 x 64 product from TMA tiles is exact in each shared-memory layout, each operand K-major or "
    "M/N-major (the cases an sm_90a GPU checks)") {
  const hb::Product p = hb::product();
  for (g::Swizzle layout : hb::kLayouts) {
    for (int majors = 0; majors < 4; ++majors) {
      for (bool adversarial : {false, true}) {
        const ProductRun run = run_product(layout, majors, hb::WgmmaBug::none, adversarial, 7);
        CHECK_MESSAGE(run.error.empty(), run.error);
        CHECK_MESSAGE(run.c == p.c, "layout ", static_cast<int>(layout), ", majors ", majors,
                      std::string(adversarial ? " (adversary)" : ""));
      }
    }
  }
}

TEST_CASE("wgmma with a bug planted fails: accumulators read before the wait, the wrong swizzle, a tile reused") {
  const hb::Product p = hb::product();
  for (int majors : {0, hb::kMajorA | hb::kMajorB}) {
    for (hb::WgmmaBug bug : {hb::WgmmaBug::read_before_wait, hb::WgmmaBug::wrong_swizzle}) {
      const ProductRun run = run_product(g::Swizzle::bytes128, majors, bug);
      CHECK_MESSAGE(run.error.empty(), run.error);
      CHECK_MESSAGE(run.c != p.c, "bug ", static_cast<int>(bug), ", majors ", majors, " not caught");
    }
  }
  // Shared memory written under a wgmma in flight: named, not merely wrong.
  const ProductRun reused = run_product(g::Swizzle::bytes128, 0, hb::WgmmaBug::tile_reused_before_wait);
  CHECK_MESSAGE(reused.error.find("changed while it was in flight") != std::string::npos, reused.error);
}

// ---- the wgmma matmul kernel ----

// C (m x n, ldc = n + 3) = alpha * A (m x k) * B + beta * C through matmul_wgmma_kernel, TA (bf16
// or f16) A given as it is (m x k) or, AMn, as A^T (k x m), B as B^T (n x k) or, BMn, as it is
// (k x n); exact small integers, so C must equal the host's product to the bit.
template <class TA, unsigned BlockN, bool AMn, bool BMn>
std::string wgmma_matmul_error(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, float beta,
                               bool adversarial, std::uint64_t seed, unsigned blocks) {
  using T = k::WgmmaTile<BlockN>;
  Backend& be = sim_backend();
  // Rows of 16-byte multiples, as the copies need, and longer than the matrix's.
  const auto padded = [](std::int64_t w) { return (w + 7) / 8 * 8 + 8; };
  const std::int64_t lda = padded(AMn ? m : k), ldb = padded(BMn ? n : k), ldc = n + 3;
  const auto av = [](std::int64_t i, std::int64_t q) { return float(int((i * 29 + q * 13 + 3) % 7) - 3); };
  const auto bv = [](std::int64_t q, std::int64_t j) { return float(int((q * 41 + j * 7 + 1) % 5) - 2); };
  std::vector<TA> a((AMn ? k : m) * lda, TA(0.0f)), b((BMn ? k : n) * ldb, TA(0.0f));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t q = 0; q < k; ++q) a[AMn ? q * lda + i : i * lda + q] = TA(av(i, q));
  }
  for (std::int64_t q = 0; q < k; ++q) {
    for (std::int64_t j = 0; j < n; ++j) b[BMn ? q * ldb + j : j * ldb + q] = TA(bv(q, j));
  }
  std::vector<float> c(m * ldc), want(m * ldc);
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = float(int(i % 11) - 5);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < ldc; ++j) {
      double sum = 0;
      for (std::int64_t q = 0; q < k && j < n; ++q) sum += double(av(i, q)) * bv(q, j);
      want[i * ldc + j] =
          j < n ? float(alpha * sum + (beta == 0 ? 0.0 : double(beta) * c[i * ldc + j])) : c[i * ldc + j];
    }
  }
  constexpr DType type = std::is_same_v<TA, half> ? DType::f16 : DType::bf16;
  Buffer ab(be, type, a.size()), bb(be, type, b.size());
  ab.upload_bytes(a.data(), a.size() * 2);
  bb.upload_bytes(b.data(), b.size() * 2);
  Buffer cb = Buffer::from(be, c);
  // As the backend makes them: K-major operands one box a stage, M/N-major ones boxes of 64 x 64.
  constexpr auto sw = g::Swizzle::bytes128;
  const auto a_map = AMn ? sim::make_tensor_map_2d(ab.data(), 2, m, k, lda * 2, 64, T::block_k, sw)
                         : sim::make_tensor_map_2d(ab.data(), 2, k, m, lda * 2, T::block_k, T::block_m, sw);
  const auto b_map = BMn ? sim::make_tensor_map_2d(bb.data(), 2, n, k, ldb * 2, 64, T::block_k, sw)
                         : sim::make_tensor_map_2d(bb.data(), 2, k, n, ldb * 2, T::block_k, T::block_n, sw);
  k::Gemm<TA, float> gemm{m,     n,    k,
                          alpha, beta, static_cast<const TA*>(ab.data()),
                          lda,   AMn,  static_cast<const TA*>(bb.data()),
                          ldb,   !BMn, static_cast<float*>(cb.data()),
                          ldc,   true, true};
  // The grid: one block per tile (blocks 0), or fewer, each walking several (as when tiles
  // outnumber the multiprocessors the backend launches a block on).
  const auto tiles = unsigned(((n + T::block_n - 1) / T::block_n) * ((m + T::block_m - 1) / T::block_m));
  const g::Dim3 grid{blocks == 0 ? tiles : blocks, 1, 1};
  const g::LaunchConfig config{"matmul_wgmma", grid, {T::threads, 1, 1}, T::shared_bytes, true};
  const auto kernel = k::matmul_wgmma_kernel<TA, BlockN, AMn, BMn>;
  try {
    if (adversarial) {
      sim::AdversaryOptions o;
      o.seed = seed;
      sim::launch_adversarial(be, o, config, kernel, a_map, b_map, gemm);
    } else {
      sim::launch(be, config, kernel, a_map, b_map, gemm);
    }
  } catch (const DeviceError& e) {
    return e.what();
  }
  const auto got = cb.to_vector<float>();
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      return "C[" + std::to_string(i / ldc) + "][" + std::to_string(i % ldc) + "] = " + std::to_string(got[i]) +
             ", not " + std::to_string(want[i]);
    }
  }
  return "";
}

// The operands' layouts by number: bit 0 A transposed (M-major), bit 1 B as it is (N-major).
const char* const kOperandLayouts[] = {"A, B^T", "A^T, B^T", "A, B", "A^T, B"};

template <unsigned BlockN, class TA = bfloat16>
std::string wgmma_matmul_error(int layout, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, float beta,
                               bool adversarial, std::uint64_t seed, unsigned blocks = 0) {
  switch (layout) {
    case 0:
      return wgmma_matmul_error<TA, BlockN, false, false>(m, n, k, alpha, beta, adversarial, seed, blocks);
    case 1:
      return wgmma_matmul_error<TA, BlockN, true, false>(m, n, k, alpha, beta, adversarial, seed, blocks);
    case 2:
      return wgmma_matmul_error<TA, BlockN, false, true>(m, n, k, alpha, beta, adversarial, seed, blocks);
    default:
      return wgmma_matmul_error<TA, BlockN, true, true>(m, n, k, alpha, beta, adversarial, seed, blocks);
  }
}

// Each shape runs at both tiles, plainly and under the adversary: four runs, one per operand
// layout (rotated from shape to shape), so every layout meets every shape and both tiles; the
// second and fourth shapes in f16, the others in bf16.
TEST_CASE(
    "the wgmma matmul kernel is exact in bf16 and f16 at both tiles and every operand layout: one tile, edges, more "
    "K steps than stages, alpha and beta") {
  struct Shape {
    std::int64_t m, n, k;
    float alpha, beta;
  };
  int rotation = 0;
  for (const Shape& s : {Shape{128, 128, 64, 1, 0}, Shape{200, 136, 328, 1, 0}, Shape{64, 300, 1000, 0.5f, 2},
                         Shape{129, 1, 17, 1, 1}}) {
    for (int run = 0; run < 4; ++run) {
      const bool adversarial = run % 2 == 1, wide = run < 2;
      const int layout = (run + rotation) % 4;
      const bool f16 = rotation % 2 == 1;
      const std::string at = std::to_string(s.m) + " x " + std::to_string(s.n) + " x " + std::to_string(s.k) + ", " +
                             kOperandLayouts[layout] + (wide ? ", 128 x 256" : ", 128 x 128") +
                             (f16 ? ", f16" : ", bf16") + (adversarial ? " (adversary)" : "");
      const auto error = [&]<unsigned BlockN, class TA>() {
        return wgmma_matmul_error<BlockN, TA>(layout, s.m, s.n, s.k, s.alpha, s.beta, adversarial, 11);
      };
      const std::string e =
          wide ? (f16 ? error.template operator()<256, half>() : error.template operator()<256, bfloat16>())
               : (f16 ? error.template operator()<128, half>() : error.template operator()<128, bfloat16>());
      CHECK_MESSAGE(e == "", at);
    }
    ++rotation;
  }
}

// Each block's thread 0 writes where its dynamic shared window starts (the shared-window address).
TANDEM_KERNEL void dynamic_window_start(std::uint32_t* out) {
  TANDEM_DYNAMIC_SHARED(unsigned char, raw);
  if (g::thread_rank() == 0) out[g::block_idx().x] = k::shared_window(raw);
}

TEST_CASE("the dynamic shared window starts at a multiple of 16 drawn per block, as CUDA promises no more") {
  Backend& be = sim_backend();
  constexpr unsigned blocks = 64;
  Buffer out(be, DType::i32, blocks);
  const g::LaunchConfig config{"dynamic_window_start", {blocks, 1, 1}, {32, 1, 1}, 4096};
  sim::launch(be, config, dynamic_window_start, static_cast<std::uint32_t*>(out.data()));
  const auto starts = out.to_vector<std::int32_t>();
  std::set<std::int32_t> seen(starts.begin(), starts.end());
  for (std::int32_t s : starts) CHECK((s >= 0 && s < 1024 && s % 16 == 0));
  CHECK(seen.size() > 1);
  CHECK(std::any_of(starts.begin(), starts.end(), [](std::int32_t s) { return s % 128 != 0; }));
}

TEST_CASE("more than 48 KiB of dynamic shared memory needs the launch's opt-in, as on CUDA") {
  Backend& be = sim_backend();
  Buffer src(be, DType::f32, 32 * 8);
  const auto map = sim::make_tensor_map_2d(src.data(), 4, 32, 8, 128, 32, 8, g::Swizzle::none);
  k::Gemm<bfloat16, float> gemm{};
  using T = k::WgmmaTile<128>;
  g::LaunchConfig config{"matmul_wgmma", {1, 1, 1}, {T::threads, 1, 1}, T::shared_bytes, false};
  CHECK_THROWS_WITH_AS(sim::launch(be, config, k::matmul_wgmma_kernel<bfloat16, 128>, map, map, gemm),
                       doctest::Contains("LaunchConfig::large_shared opts in"), DeviceError);
}

TEST_CASE(
    "the tensor_core tier runs the wgmma kernel only with TANDEM_GPU_TENSOR_KERNEL=wgmma, and says what it takes") {
  Backend& be = sim_backend();
  struct Restore {
    ~Restore() { ::unsetenv("TANDEM_GPU_TENSOR_KERNEL"); }
  } restore;
  const std::int64_t m = 136, n = 72, kk = 200;
  std::vector<bfloat16> a(m * kk), bt(n * kk);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = bfloat16(float(int(i % 7) - 3));
  for (std::size_t i = 0; i < bt.size(); ++i) bt[i] = bfloat16(float(int(i % 5) - 2));
  const Buffer ab = Buffer::from(be, a), bb = Buffer::from(be, bt);
  Buffer want(be, DType::f32, m * n), got(be, DType::f32, m * n);
  MatmulOptions o;
  o.trans_b = Transpose::yes;
  o.tier = MatmulTier::naive;
  matmul(matrix(ab, m, kk), matrix(bb, n, kk), matrix(want, m, n), o);
  o.tier = MatmulTier::tensor_core;
  ::setenv("TANDEM_GPU_TENSOR_KERNEL", "wgmma", 1);
  matmul(matrix(ab, m, kk), matrix(bb, n, kk), matrix(got, m, n), o);
  be.synchronize({});
  CHECK(got.to_vector<float>() == want.to_vector<float>());  // small integers: exact either way
  // B as it is (the product's default, N-major to wgmma) and A transposed: the same product.
  std::vector<bfloat16> at(kk * m), b(kk * n);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t q = 0; q < kk; ++q) at[q * m + i] = a[i * kk + q];
  }
  for (std::int64_t j = 0; j < n; ++j) {
    for (std::int64_t q = 0; q < kk; ++q) b[q * n + j] = bt[j * kk + q];
  }
  const Buffer atb = Buffer::from(be, at), bbn = Buffer::from(be, b);
  MatmulOptions plain;
  plain.tier = MatmulTier::tensor_core;
  tandem::fill(got, std::nanf(""));
  matmul(matrix(ab, m, kk), matrix(bbn, kk, n), matrix(got, m, n), plain);
  be.synchronize({});
  CHECK(got.to_vector<float>() == want.to_vector<float>());
  MatmulOptions both = plain;
  both.trans_a = Transpose::yes;
  tandem::fill(got, std::nanf(""));
  matmul(matrix(atb, kk, m), matrix(bbn, kk, n), matrix(got, m, n), both);
  be.synchronize({});
  CHECK(got.to_vector<float>() == want.to_vector<float>());
  // f16 inputs: the same product.
  Buffer a16(be, DType::f16, a.size()), b16(be, DType::f16, b.size());
  convert(ab, a16);
  convert(bbn, b16);
  tandem::fill(got, std::nanf(""));
  matmul(matrix(a16, m, kk), matrix(b16, kk, n), matrix(got, m, n), plain);
  be.synchronize({});
  CHECK(got.to_vector<float>() == want.to_vector<float>());
  // What it does not take is refused by name (rows not 16 bytes apart), never run on the other
  // kernel.
  const std::int64_t odd = kk + 1;  // 402 bytes a row
  Buffer ragged(be, DType::bf16, m * odd);
  CHECK_THROWS_WITH_AS(matmul(matrix(ragged, m, kk, odd), matrix(bbn, kk, n), matrix(got, m, n), plain),
                       doctest::Contains("rows a multiple of 16 bytes apart"), Unsupported);
  // tandem info says which kernel is in force.
  const auto kernel_line = [&] {
    for (const auto& [what, how] : be.properties().tuning) {
      if (what == "tensor_core kernel") return how;
    }
    return std::string("(none)");
  };
  CHECK(kernel_line().rfind("wgmma, 128 x 256 tiles", 0) == 0);
  // By default the tier is the mma.sync kernel, which takes that product.
  ::unsetenv("TANDEM_GPU_TENSOR_KERNEL");
  CHECK(kernel_line().rfind("mma.sync", 0) == 0);
  CHECK_NOTHROW(matmul(matrix(ragged, m, kk, odd), matrix(bbn, kk, n), matrix(got, m, n), plain));
  be.synchronize({});
}

TEST_CASE(
    "the wgmma matmul kernel walks every tile when the grid has fewer blocks, its stages' phases carried across") {
  for (bool adversarial : {false, true}) {
    const std::string how = adversarial ? " (adversary)" : "";
    const int layout = adversarial ? 2 : 0, other = adversarial ? 1 : 3;  // each layout once
    // One block over 2 x 2 tiles with edges both ways, 3 K steps per tile against 4 stages: each
    // tile starts at another stage and parity, so a stage index or phase restarted per tile fails.
    CHECK_MESSAGE(wgmma_matmul_error<256>(layout, 200, 300, 136, 1, 0, adversarial, 5, 1) == "", "128 x 256, ",
                  std::string(kOperandLayouts[layout]), how);
    CHECK_MESSAGE(wgmma_matmul_error<128>(other, 300, 300, 72, 1, 1, adversarial, 5, 1) == "", "128 x 128, ",
                  std::string(kOperandLayouts[other]), how);
  }
  // 18 tile rows: a whole group of 16 and a part one, three blocks taking turns across them.
  CHECK_MESSAGE(wgmma_matmul_error<128>(2, 18 * 128 - 5, 140, 16, 1, 0, false, 5, 3) == "", "18 x 2 tiles");
}

TEST_CASE("the wgmma kernel's tile order visits every tile once, a group of 16 tile rows at a time") {
  using T = k::WgmmaTile<256>;
  for (const std::int64_t tiles_m : {1, 5, 16, 17, 33, 64}) {
    for (const std::int64_t tiles_n : {1, 3, 32}) {
      std::vector<int> seen(tiles_m * tiles_n, 0);
      std::int64_t prev_bi = -1, prev_bj = -1;
      int out_of_order = 0;
      for (std::int64_t tile = 0; tile < tiles_m * tiles_n; ++tile) {
        std::int64_t bi = -1, bj = -1;
        k::wgmma_tile_at<T>(tile, tiles_m, tiles_n, bi, bj);
        REQUIRE((bi >= 0 && bi < tiles_m && bj >= 0 && bj < tiles_n));
        ++seen[bi * tiles_n + bj];
        // Group g is tile rows [16g, 16g + 16), walked down each column, then the next column.
        const std::int64_t group = tile / (T::group_rows * tiles_n);
        const bool starts_group = tile % (T::group_rows * tiles_n) == 0;
        const bool down = bj == prev_bj && bi == prev_bi + 1;
        const bool next_column = bj == prev_bj + 1 && bi == group * T::group_rows;
        const bool first = bj == 0 && bi == group * T::group_rows;
        if (bi / T::group_rows != group || (starts_group ? !first : !(down || next_column))) ++out_of_order;
        prev_bi = bi;
        prev_bj = bj;
      }
      CHECK_MESSAGE(std::count(seen.begin(), seen.end(), 1) == tiles_m * tiles_n, tiles_m, " x ", tiles_n);
      CHECK_MESSAGE(out_of_order == 0, tiles_m, " x ", tiles_n);
    }
  }
}

// ---- misuse ----

enum class Misuse : int {
  extra_arrival,
  never_initialized,
  never_arrives,
  copy_in_flight,
  misaligned_box,
  unfenced_init
};

TANDEM_KERNEL void misuse(TANDEM_GRID_CONSTANT const k::TensorMap map, int what) {
  TANDEM_SHARED(hb::BoxTile, tile);
  TANDEM_SHARED(k::MBarrier, bar, [2]);
  const auto m = static_cast<Misuse>(what);
  if (g::thread_rank() == 0) {
    k::mbarrier_init(&bar[0], 1);
    if (m != Misuse::unfenced_init) k::fence_mbarrier_init();
  }
  g::sync_threads();
  if (g::thread_rank() != 0) return;
  switch (m) {
    case Misuse::extra_arrival:
      k::mbarrier_arrive_expect_tx(&bar[0], 64);  // the phase waits for 64 bytes: a second arrival is one too many
      k::mbarrier_arrive(&bar[0]);
      break;
    case Misuse::never_initialized:
      k::mbarrier_arrive(&bar[1]);
      break;
    case Misuse::never_arrives:
      k::mbarrier_wait_parity(&bar[0], 0);
      break;
    case Misuse::copy_in_flight:
      k::mbarrier_arrive_expect_tx(&bar[0], 1024);
      k::tma_load_2d(tile.bytes, &map, 0, 0, &bar[0]);
      break;  // ends without waiting
    case Misuse::unfenced_init:
      k::mbarrier_arrive_expect_tx(&bar[0], 1024);
      k::tma_load_2d(tile.bytes, &map, 0, 0, &bar[0]);
      k::mbarrier_wait_parity(&bar[0], 0);
      break;
    case Misuse::misaligned_box:
      k::tma_load_2d(tile.bytes + 64, &map, 0, 0, &bar[0]);
      break;
  }
}

TEST_CASE("misused mbarriers and copies fail, naming what went wrong") {
  Backend& be = sim_backend();
  Buffer src(be, DType::f32, 32 * 8);
  const auto map = sim::make_tensor_map_2d(src.data(), 4, 32, 8, 128, 32, 8, g::Swizzle::none);
  const auto fails_with = [&](Misuse m, const char* words) {
    try {
      sim::launch(be, {"misuse", {1, 1, 1}, {32, 1, 1}}, misuse, map, static_cast<int>(m));
    } catch (const std::exception& e) {
      MESSAGE(std::string(e.what()));
    }
    CHECK_THROWS_WITH_AS(sim::launch(be, {"misuse", {1, 1, 1}, {32, 1, 1}}, misuse, map, static_cast<int>(m)),
                         doctest::Contains(words), DeviceError);
  };
  fails_with(Misuse::extra_arrival, "beyond its count");
  fails_with(Misuse::never_initialized, "never initialized");
  fails_with(Misuse::never_arrives, "hung: threads wait on mbarriers");
  fails_with(Misuse::copy_in_flight, "TMA copies in flight");
  fails_with(Misuse::misaligned_box, "not a multiple of 128 bytes");
  fails_with(Misuse::unfenced_init, "has not fenced");
}

}  // namespace
