// The openmp backend's tensor_core tier: bf16 matmul on Intel AMX tiles (tdpbf16ps), f32
// accumulation. Compiled with -mamx-tile -mamx-bf16 only (no AVX flags: the packing loops stay
// baseline code, and the compiler never emits AMX instructions on its own), and run only where
// amx_bf16() says the CPU, the OS and the process allow it.
//
// Blocking: C in blocks of 32 x 32 (2 x 2 tiles of 16 x 16 f32, four accumulators). A is packed
// as bf16 panels of 32 rows and B as panels of 32 columns (K padded to a multiple of 32 with
// zeros), each panel a run of 2 KiB steps, one per 32 of K, that hold the step's two tiles one
// after the other, each 1 KiB with rows of 64 bytes: a tile load reads 1 KiB in a row (rows of
// the whole panel apart, as first written, cost a page per row). A's tiles are 16 rows x 32 of K;
// B's are 16 pair rows x 16 columns in the pair-interleaved ("VNNI") layout tdpbf16ps reads: pair
// row k/2 holds the columns' (B[k][c], B[k + 1][c]). Each step loads two A tiles and two B tiles
// and issues four tdpbf16ps (2 x 16 x 16 x 32 flops each). bf16 is packed as bf16: the
// inputs are never widened, which is the point of the tier.
#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "amx.hpp"
#include "openmp_backend.hpp"

namespace tandem::openmp {

namespace {

constexpr std::int64_t kBlock = 32;  // rows of an A panel, columns of a B panel, K per step
// Row panels that share each B panel while it is in L2: 4 x 32 rows x 4096 bf16 = 1 MiB of A
// beside a 256 KiB B panel in the 2 MiB L2 of every AMX CPU so far.
constexpr std::int64_t kGroup = 4;
constexpr std::int64_t kAhead = 2;  // steps of K prefetched ahead of the tile loads
static_assert(sizeof(bfloat16) == 2, "bf16 rows are copied as their bits");

#if defined(__x86_64__)
// Whether the CPU has AMX-TILE and AMX-BF16, the OS saves their state (XCR0 bits 17 and 18), and
// Linux lets this process use the tile data (ARCH_REQ_XCOMP_PERM: without it the first tile
// instruction is a fatal signal); "" when all hold, else why not.
std::string amx_refusal() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0 || (d & (1u << 24)) == 0 || (d & (1u << 22)) == 0) {
    return "this CPU has no AMX-BF16";
  }
  if (__get_cpuid(1, &a, &b, &c, &d) == 0 || (c & (1u << 27)) == 0) return "the OS does not enable XSAVE";
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return "the OS does not save the AMX tile state (XCR0)";
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (::syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    return "Linux refused this process the AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM)";
  }
  return "";
}
#else
std::string amx_refusal() { return "not an x86-64 CPU"; }
#endif

// The tile configuration (palette 1): tiles 0-3 the C accumulators (16 rows of 16 f32), 4-5 the
// A tiles (16 rows of 32 bf16), 6-7 the B tiles (16 pair rows of 16 columns x 2 bf16).
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};

TileConfig tile_config() {
  TileConfig t;
  for (int i = 0; i < 8; ++i) {
    t.bytes_per_row[i] = 64;
    t.rows[i] = 16;
  }
  return t;
}

std::uint16_t bits_at(const bfloat16* m, std::int64_t ld, Transpose t, std::int64_t r, std::int64_t c) {
  return (t == Transpose::no ? m[r * ld + c] : m[c * ld + r]).bits;
}

constexpr std::int64_t kStep = kBlock * kBlock;  // bf16 per K step of a panel: two 16 x 32 tiles

// op(A)'s rows [i0, i0 + 32) as a panel: for each step of 32 along K, rows 0-15 then 16-31, each
// row the step's 32 values (zeros past m and k).
void pack_a(const GemmArgs& g, std::int64_t i0, std::int64_t kp, std::uint16_t* out) {
  const auto* a = static_cast<const bfloat16*>(g.a);
  for (std::int64_t r = 0; r < kBlock; ++r) {
    const std::int64_t i = i0 + r;
    for (std::int64_t p0 = 0; p0 < kp; p0 += kBlock) {
      std::uint16_t* row = out + (p0 / kBlock) * kStep + r * kBlock;
      const std::int64_t valid = i < g.m ? std::clamp<std::int64_t>(g.k - p0, 0, kBlock) : 0;
      if (g.trans_a == Transpose::no && valid > 0) {
        std::memcpy(row, a + i * g.lda + p0, static_cast<std::size_t>(valid) * 2);  // bfloat16 is its bits
      } else {
        for (std::int64_t q = 0; q < valid; ++q) row[q] = bits_at(a, g.lda, g.trans_a, i, p0 + q);
      }
      std::fill(row + valid, row + kBlock, std::uint16_t(0));
    }
  }
}

// op(B)'s columns [j0, j0 + 32) as a panel: for each step of 32 along K, the tile of columns
// 0-15 then that of columns 16-31, each 16 pair rows of 16 (B[k][c], B[k + 1][c]) pairs (zeros
// past k and n).
void pack_b(const GemmArgs& g, std::int64_t j0, std::int64_t kp, std::uint16_t* out) {
  const auto* b = static_cast<const bfloat16*>(g.b);
  const std::int64_t cols = std::min(kBlock, g.n - j0);
  for (std::int64_t p = 0; p < kp; p += 2) {
    // Pair row (p % 32) / 2 of step p / 32; columns c < 16 in the first tile, the rest 512 on.
    std::uint16_t* pair_row = out + (p / kBlock) * kStep + ((p % kBlock) / 2) * kBlock;
    const auto put = [&](std::int64_t c, std::uint16_t lo, std::uint16_t hi) {
      std::uint16_t* at = pair_row + (c / 16) * (kStep / 2) + 2 * (c % 16);
      at[0] = lo;
      at[1] = hi;
    };
    if (g.trans_b == Transpose::no && p + 1 < g.k && cols == kBlock) {  // two rows of B, interleaved
      const bfloat16* r0 = b + p * g.ldb + j0;
      const bfloat16* r1 = r0 + g.ldb;
      for (std::int64_t c = 0; c < kBlock; ++c) put(c, r0[c].bits, r1[c].bits);
      continue;
    }
    for (std::int64_t c = 0; c < kBlock; ++c) {
      const std::int64_t j = j0 + c;
      const bool in = j < g.n;
      put(c, in && p < g.k ? bits_at(b, g.ldb, g.trans_b, p, j) : 0,
          in && p + 1 < g.k ? bits_at(b, g.ldb, g.trans_b, p + 1, j) : 0);
    }
  }
}

// One 32 x 32 block of C: the A panel's rows times the B panel's columns over kp, then
// C = alpha * sum + beta * C (C not read when beta == 0) for the rows and columns inside C.
void block(const GemmArgs& g, const std::uint16_t* ap, const std::uint16_t* bp, std::int64_t kp, std::int64_t i0,
           std::int64_t j0) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  constexpr std::int64_t stride = 64;  // bytes between the rows of a packed tile
  const std::int64_t steps = kp / kBlock;
  for (std::int64_t s = 0; s < steps; ++s) {
    const std::uint16_t* a_step = ap + s * kStep;
    const std::uint16_t* b_step = bp + s * kStep;
    if (s + kAhead < steps) {  // the step kAhead on, into L1 before its tile loads ask for it
      const char* a_next = reinterpret_cast<const char*>(a_step + kAhead * kStep);
      const char* b_next = reinterpret_cast<const char*>(b_step + kAhead * kStep);
      for (std::int64_t line = 0; line < kStep * 2; line += 64) {
        _mm_prefetch(a_next + line, _MM_HINT_T0);
        _mm_prefetch(b_next + line, _MM_HINT_T0);
      }
    }
    _tile_loadd(4, a_step, stride);
    _tile_loadd(5, a_step + kStep / 2, stride);
    _tile_loadd(6, b_step, stride);
    _tile_loadd(7, b_step + kStep / 2, stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float sums[kBlock][kBlock];
  _tile_stored(0, &sums[0][0], kBlock * 4);
  _tile_stored(1, &sums[0][16], kBlock * 4);
  _tile_stored(2, &sums[16][0], kBlock * 4);
  _tile_stored(3, &sums[16][16], kBlock * 4);
  auto* c = static_cast<float*>(g.c);
  const float alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
  const std::int64_t rows = std::min(kBlock, g.m - i0), cols = std::min(kBlock, g.n - j0);
  for (std::int64_t r = 0; r < rows; ++r) {
    float* out = c + (i0 + r) * g.ldc + j0;
    if (g.beta == 0) {
      for (std::int64_t q = 0; q < cols; ++q) out[q] = alpha * sums[r][q];
    } else {
      for (std::int64_t q = 0; q < cols; ++q) out[q] = alpha * sums[r][q] + beta * out[q];
    }
  }
}

}  // namespace

bool amx_bf16(std::string* why) {
  static const std::string refusal = amx_refusal();
  if (why != nullptr) *why = refusal;
  return refusal.empty();
}

void matmul_amx_bf16(const GemmArgs& g) {
  if (g.ab_type != DType::bf16 || g.c_type != DType::f32) {
    throw Unsupported("openmp: the tensor_core tier takes bf16 inputs with an f32 result");
  }
  if (std::string why; !amx_bf16(&why)) throw Unsupported("openmp: no tensor_core tier here: " + why);
  const std::int64_t kp = (g.k + kBlock - 1) / kBlock * kBlock;
  const std::int64_t row_panels = (g.m + kBlock - 1) / kBlock, col_panels = (g.n + kBlock - 1) / kBlock;
  std::vector<std::uint16_t> a(static_cast<std::size_t>(row_panels * kBlock * kp));
  std::vector<std::uint16_t> b(static_cast<std::size_t>(col_panels * kBlock * kp));
  const std::int64_t groups = (row_panels + kGroup - 1) / kGroup;
  const bool parallel = g.m * g.n * g.k >= std::int64_t(1) << 18;
#pragma omp parallel if (parallel)
  {
#pragma omp for schedule(static) nowait
    for (std::int64_t ib = 0; ib < row_panels; ++ib) pack_a(g, ib * kBlock, kp, a.data() + ib * kBlock * kp);
#pragma omp for schedule(static)
    for (std::int64_t jb = 0; jb < col_panels; ++jb) pack_b(g, jb * kBlock, kp, b.data() + jb * kBlock * kp);
    // Tile state is per thread: each one configures its tiles, and releases them when done.
    const TileConfig config = tile_config();
    _tile_loadconfig(&config);
    // A group of row panels outermost, then the B panels, each used by every panel of the group
    // while it is in L2: the group (kGroup x 32 rows x K bf16) stays there as the B panels pass.
#pragma omp for collapse(2) schedule(static)
    for (std::int64_t group = 0; group < groups; ++group) {
      for (std::int64_t jb = 0; jb < col_panels; ++jb) {
        const std::int64_t last = std::min(row_panels, (group + 1) * kGroup);
        for (std::int64_t ib = group * kGroup; ib < last; ++ib) {
          block(g, a.data() + ib * kBlock * kp, b.data() + jb * kBlock * kp, kp, ib * kBlock, jb * kBlock);
        }
      }
    }
    _tile_release();
  }
}

}  // namespace tandem::openmp
