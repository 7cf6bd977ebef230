// The openmp backend's tensor_core tier: bf16 matmul on Intel AMX tiles (tdpbf16ps), or with
// AVX512-BF16 (vdpbf16ps) on CPUs that have that and no AMX, f32 accumulation. Compiled with
// -mamx-tile -mamx-bf16 only (no AVX flags: the packing loops stay baseline code, the AVX-512
// chunk has a target attribute of its own, and the compiler never emits AMX instructions on its
// own), and run only where amx_bf16() / host::cpu_has_avx512bf16() say the CPU, the OS and the
// process allow it.
//
// Blocking: C in blocks of 32 x 32 (2 x 2 tiles of 16 x 16 f32, four accumulators). A is packed
// as bf16 panels of 32 rows and B as panels of 32 columns (K padded to a multiple of 32 with
// zeros), each panel a series of 2 KiB steps, one per 32 of K, that hold the step's two tiles one
// after the other, each 1 KiB with rows of 64 bytes on cache lines of their own: a tile load
// reads 1 KiB in a row. A's tiles are 16 rows x 32 of K; B's are 16 pair rows x 16 columns in
// the pair-interleaved ("VNNI") layout tdpbf16ps and vdpbf16ps read: pair row k/2 holds the
// columns' (B[k][c], B[k + 1][c]). Each step loads two A tiles and two B tiles and issues four
// tdpbf16ps (2 x 16 x 16 x 32 flops each), each load just before the first product that needs
// it. K runs in chunks (amx_blocking: from L1 on AMX, 64 steps on AVX512-BF16), the blocks' sums
// kept between chunks in accumulators of their own; on the AVX512-BF16 engine the last chunk
// writes C from its registers, on AMX it stores full blocks of C from the tiles when alpha is 1
// and beta 0 (the other blocks go through write_block). The AVX512-BF16 engine reads A in place
// where it can (APanels). bf16 is packed as bf16: the inputs are never widened, which is the
// point of the tier. The packed operands and accumulators are kept per thread between calls (pack_buffer.hpp).
#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "../host/cpu_info.hpp"
#include "amx.hpp"
#include "openmp_backend.hpp"
#include "pack_buffer.hpp"
#include "tandem/topology.hpp"

namespace tandem::openmp {

namespace {

constexpr std::int64_t kBlock = 32;  // rows of an A panel, columns of a B panel, K per step
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

// The packed panels from panel `first` on: each panel's steps one after the other, panel after
// panel. (Laid out chunk by chunk of K instead, so that a chunk's pieces of a panel group were one
// run, products of 1024^3-4096^3 on two threads ran within the noise of this layout.)
struct Panels {
  std::uint16_t* data;
  std::int64_t steps;      // per panel
  std::int64_t first = 0;  // the panel at data
  std::uint16_t* step(std::int64_t p, std::int64_t s) const { return data + ((p - first) * steps + s) * kStep; }
};

// A's row panels as the AVX512-BF16 engine reads them: panels [0, direct) straight from op(A) =
// A, whose rows are lda apart and a step 32 values on (no copy: vdpbf16ps takes A's pairs as
// they lie), the rest packed (rows 32 apart, a step kStep on). The AMX engine's tile loads read
// packed panels only (direct = 0). Reading A in place saves the pack's pass over memory: at
// 1024^3 on two threads packing A took 0.10-0.39 ms of a 5.2-5.8 ms product, while the chunks ran
// as fast from A itself (rows 2 KiB apart; at 4096^3, 8 KiB apart, too).
struct APanels {
  Panels packed;
  const std::uint16_t* a = nullptr;  // op(A) = A's bits
  std::int64_t lda = 0, direct = 0;
  const std::uint16_t* step(std::int64_t p, std::int64_t s) const {
    return p < direct ? a + p * kBlock * lda + s * kBlock : packed.step(p, s);
  }
  std::int64_t row_stride(std::int64_t p) const { return p < direct ? lda : kBlock; }
  std::int64_t step_stride(std::int64_t p) const { return p < direct ? kBlock : kStep; }
};

// op(A)'s rows [i0, i0 + 32) as a panel: for each step of 32 along K, rows 0-15 then 16-31, each
// row the step's 32 values (zeros past m and k).
void pack_a(const GemmArgs& g, std::int64_t ib, const Panels& out) {
  const auto* a = static_cast<const bfloat16*>(g.a);
  const std::int64_t i0 = ib * kBlock, kp = out.steps * kBlock;
  if (g.trans_a == Transpose::yes) {
    // op(A) = A^T: a step's 32 x 32 piece is a transpose of 32 rows of A, each read in order (a
    // walk down A's columns would touch a new line for every element).
    for (std::int64_t p0 = 0; p0 < kp; p0 += kBlock) {
      std::uint16_t* step = out.step(ib, p0 / kBlock);
      if (i0 + kBlock > g.m || p0 + kBlock > g.k) {
        for (std::int64_t r = 0; r < kBlock; ++r) {
          for (std::int64_t q = 0; q < kBlock; ++q) {
            const bool in = i0 + r < g.m && p0 + q < g.k;
            step[r * kBlock + q] = in ? bits_at(a, g.lda, g.trans_a, i0 + r, p0 + q) : std::uint16_t(0);
          }
        }
        continue;
      }
      for (std::int64_t q = 0; q < kBlock; ++q) {
        const bfloat16* src = a + (p0 + q) * g.lda + i0;  // op(A)[i0 + r][p0 + q] = src[r]
        for (std::int64_t r = 0; r < kBlock; ++r) step[r * kBlock + q] = src[r].bits;
      }
    }
    return;
  }
  // Step by step, so that the panel is written in order (row by row wrote it 2 KiB apart: at
  // 2048^3 packing took 0.65 ms on two threads that way, 0.47 this way).
  for (std::int64_t p0 = 0; p0 < kp; p0 += kBlock) {
    std::uint16_t* const step = out.step(ib, p0 / kBlock);
    for (std::int64_t r = 0; r < kBlock; ++r) {
      const std::int64_t i = i0 + r;
      std::uint16_t* row = step + r * kBlock;
      const std::int64_t valid = i < g.m ? std::clamp<std::int64_t>(g.k - p0, 0, kBlock) : 0;
      if (valid == kBlock) {
        std::memcpy(row, a + i * g.lda + p0, kBlock * 2);  // a fixed size: inline moves, not a call
        continue;
      }
      if (valid > 0) {
        std::memcpy(row, a + i * g.lda + p0, static_cast<std::size_t>(valid) * 2);  // bfloat16 is its bits
      }
      std::fill(row + valid, row + kBlock, std::uint16_t(0));
    }
  }
}

// Pair rows [p_begin / 2, kp / 2) of the panel of columns [j0, j0 + 32): any transpose and
// edge, zeros past k and n; two rows of op(B) = B at a time where both are in.
void pack_b_pairs(const GemmArgs& g, std::int64_t jb, std::int64_t p_begin, const Panels& out) {
  const auto* b = static_cast<const bfloat16*>(g.b);
  const std::int64_t j0 = jb * kBlock, kp = out.steps * kBlock;
  const std::int64_t cols = std::min(kBlock, g.n - j0);
  for (std::int64_t p = p_begin; p < kp; p += 2) {
    // Pair row (p % 32) / 2 of step p / 32; columns c < 16 in the first tile, the rest 512 on.
    std::uint16_t* pair_row = out.step(jb, p / kBlock) + ((p % kBlock) / 2) * kBlock;
    const auto put = [&](std::int64_t c, std::uint16_t lo, std::uint16_t hi) {
      std::uint16_t* at = pair_row + (c / 16) * (kStep / 2) + 2 * (c % 16);
      at[0] = lo;
      at[1] = hi;
    };
    if (g.trans_b == Transpose::no && p + 1 < g.k && cols == kBlock) {
      // Two rows of B interleaved eight columns at a time (SSE2, which every x86-64 CPU has).
      const bfloat16* r0 = b + p * g.ldb + j0;
      const bfloat16* r1 = r0 + g.ldb;
      for (std::int64_t c = 0; c < kBlock; c += 8) {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + c));
        const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + c));
        std::uint16_t* at = pair_row + (c / 16) * (kStep / 2) + 2 * (c % 16);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(at), _mm_unpacklo_epi16(x, y));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(at + 8), _mm_unpackhi_epi16(x, y));
      }
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

// Full panels [jb0, jb1) of op(B) = B (all 32 columns in n), pair rows [0, k / 2): each pair of
// B's rows read once, left to right, and split into the panels' pair rows. A panel at a time
// would read 64 bytes from each row of B, a new line and often a new page each time.
void pack_b_rows(const GemmArgs& g, std::int64_t jb0, std::int64_t jb1, const Panels& out) {
  const auto* b = static_cast<const bfloat16*>(g.b);
  for (std::int64_t p = 0; p + 1 < g.k; p += 2) {
    const bfloat16* r0 = b + p * g.ldb;
    const bfloat16* r1 = r0 + g.ldb;
    for (std::int64_t jb = jb0; jb < jb1; ++jb) {
      std::uint16_t* pair_row = out.step(jb, p / kBlock) + ((p % kBlock) / 2) * kBlock;
      // Two rows interleaved eight columns at a time (SSE2, which every x86-64 CPU has).
      for (std::int64_t c = 0; c < kBlock; c += 8) {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + jb * kBlock + c));
        const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + jb * kBlock + c));
        std::uint16_t* at = pair_row + (c / 16) * (kStep / 2) + 2 * (c % 16);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(at), _mm_unpacklo_epi16(x, y));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(at + 8), _mm_unpackhi_epi16(x, y));
      }
    }
  }
}

// op(B)'s columns [j0, j0 + 32) as a panel: for each step of 32 along K, the tile of columns
// 0-15 then that of columns 16-31, each 16 pair rows of 16 (B[k][c], B[k + 1][c]) pairs (zeros
// past k and n).
void pack_b(const GemmArgs& g, std::int64_t jb, const Panels& out) {
  const auto* b = static_cast<const bfloat16*>(g.b);
  const std::int64_t j0 = jb * kBlock, kp = out.steps * kBlock;
  if (g.trans_b == Transpose::yes && j0 + kBlock <= g.n) {
    // op(B) = B^T: the pair (op(B)[p][c], op(B)[p + 1][c]) is B[c][p], B[c][p + 1], one 4-byte
    // word of B's row c; each full step copies 32 rows' 16 words, reading every row in order.
    for (std::int64_t p0 = 0; p0 + kBlock <= g.k; p0 += kBlock) {
      std::uint16_t* step = out.step(jb, p0 / kBlock);
      for (std::int64_t c = 0; c < kBlock; ++c) {
        const bfloat16* src = b + (j0 + c) * g.ldb + p0;
        std::uint16_t* column = step + (c / 16) * (kStep / 2) + 2 * (c % 16);
        for (std::int64_t pair = 0; pair < kBlock / 2; ++pair) std::memcpy(column + pair * kBlock, src + 2 * pair, 4);
      }
    }
    const std::int64_t full = g.k / kBlock * kBlock;  // the last, partial step (if any) as an edge
    if (full < kp) pack_b_pairs(g, jb, full, out);
    return;
  }
  pack_b_pairs(g, jb, 0, out);
}

// Panels [jb0, jb1) of op(B): full panels of an untransposed B row by row (pack_b_rows, then
// their last rows past the pairs and the zeros to the step), the rest a panel at a time.
void pack_b_range(const GemmArgs& g, std::int64_t jb0, std::int64_t jb1, const Panels& out) {
  const std::int64_t full = g.trans_b == Transpose::no ? std::min(jb1, g.n / kBlock) : jb0;
  if (full > jb0) {
    pack_b_rows(g, jb0, full, out);
    for (std::int64_t jb = jb0; jb < full; ++jb) pack_b_pairs(g, jb, g.k / 2 * 2, out);
  }
  for (std::int64_t jb = std::max(jb0, full); jb < jb1; ++jb) pack_b(g, jb, out);
}

// Lines a chunk brings into L2 while its tiles work, spread over its steps: what the calls after
// it read first (the next A piece, the next chunk's B pieces) would otherwise wait on L3. (A
// prefetch of the next call's accumulators into L1 did not help, and one of B's next step into L1
// cost 5-10%: B's tile loads find it in L2 soon enough.)
struct Lines {
  const char* at = nullptr;
  std::int64_t count = 0;  // 64-byte lines from `at`
};
using Ahead = std::array<Lines, 2>;

// Share k of `parts` of the `total` lines from `at`: a call's part of a piece that several calls
// bring in between them.
Lines share(const void* at, std::int64_t total, std::int64_t k, std::int64_t parts) {
  const std::int64_t from = k * total / parts, to = (k + 1) * total / parts;
  return {static_cast<const char*>(at) + 64 * from, to - from};
}

// n steps of one 32 x 32 block of C (ap, bp: the A and B panels' first step of the chunk): the A
// panel's rows times the B panel's columns, added to the sums in `from` (32 x 32 f32, rows of 128
// bytes; nullptr: the first chunk, from zero) and stored to `to` (rows to_stride bytes apart: the
// accumulators, or C itself where the last chunk's sums are C).
void chunk(const std::uint16_t* ap, const std::uint16_t* bp, std::int64_t n, const float* from, float* to,
           std::int64_t to_stride, const Ahead& ahead) {
  constexpr std::int64_t stride = 64;  // bytes between the rows of a packed tile
  constexpr std::int64_t acc_stride = kBlock * 4;
  if (from == nullptr) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  } else {
    _tile_loadd(0, from, acc_stride);
    _tile_loadd(1, from + 16, acc_stride);
    _tile_loadd(2, from + 16 * kBlock, acc_stride);
    _tile_loadd(3, from + 16 * kBlock + 16, acc_stride);
  }
  const std::int64_t per_step[2] = {(ahead[0].count + n - 1) / n, (ahead[1].count + n - 1) / n};
  for (std::int64_t s = 0; s < n; ++s) {
    for (std::size_t r = 0; r < ahead.size(); ++r) {
      for (std::int64_t i = s * per_step[r], end = std::min(ahead[r].count, i + per_step[r]); i < end; ++i) {
        _mm_prefetch(ahead[r].at + 64 * i, _MM_HINT_T1);
      }
    }
    const std::uint16_t* a_step = ap + s * kStep;
    const std::uint16_t* b_step = bp + s * kStep;
    _tile_loadd(4, a_step, stride);
    _tile_loadd(6, b_step, stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_loadd(7, b_step + kStep / 2, stride);
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(5, a_step + kStep / 2, stride);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  const std::int64_t row16 = 16 * to_stride / 4;  // floats from the block's row 0 to its row 16
  _tile_stored(0, to, to_stride);
  _tile_stored(1, to + 16, to_stride);
  _tile_stored(2, to + row16, to_stride);
  _tile_stored(3, to + row16 + 16, to_stride);
}

// Where the last chunk of a block writes C on the AVX512-BF16 engine: C = alpha * sum + beta * C
// (C not read when beta == 0) for the block's rows and columns in C, straight from the registers.
struct BlockOut {
  float* c = nullptr;  // nullptr: not the last chunk, the sums go back to the accumulators
  std::int64_t ldc = 0, rows = 0, cols = 0;
  float alpha = 1, beta = 0;
  bool read_c = false;  // beta != 0, decided on the double
};

// The C block at (i0, j0), with g's alpha and beta.
BlockOut block_out(const GemmArgs& g, std::int64_t i0, std::int64_t j0) {
  BlockOut out;
  out.c = static_cast<float*>(g.c) + i0 * g.ldc + j0;
  out.ldc = g.ldc;
  out.rows = std::min(kBlock, g.m - i0);
  out.cols = std::min(kBlock, g.n - j0);
  out.alpha = static_cast<float>(g.alpha);
  out.beta = static_cast<float>(g.beta);
  out.read_c = g.beta != 0;
  return out;
}

// Where a chunk finds its A panel's rows: row r of step s0 + d at at + r * row + d * step.
struct ARows {
  const std::uint16_t* at;
  std::int64_t row, step;
};

// Steps [s0, s1) of the block with AVX512-BF16 (ap: the A panel from step s0; bp: the B panel's
// step s0; the first chunk, s0 == 0, starts from zero): vdpbf16ps adds a pair of bf16 products
// into each f32 lane, so one instruction takes a broadcast (A[i][k], A[i][k + 1]) pair against a
// pair row of B's packed tile, 16 columns wide. Eight rows of the block at a time: 16 accumulators, two B registers. What
// the next call reads first comes from L2 or beyond and nothing asks for it early, so it is
// prefetched here: the next call's piece of B (b_next: next_steps steps, at most s1 - s0 of them)
// during the first two of the four passes, a line per pair row, and the next block's
// accumulators (acc_next, 4 KiB) during the first step of the last two.
__attribute__((target("avx512f,avx512bf16"))) void chunk_avx512bf16(const ARows& ap, const std::uint16_t* bp,
                                                                    const std::uint16_t* b_next,
                                                                    std::int64_t next_steps, const float* acc_next,
                                                                    std::int64_t s0, std::int64_t s1, float* acc,
                                                                    const BlockOut& out) {
  constexpr int kRows = 8;
  const char* prefetch = reinterpret_cast<const char*>(b_next);
  const std::int64_t prefetch_lines = std::min(next_steps, s1 - s0) * kStep * 2 / 64;
  for (std::int64_t r0 = 0; r0 < kBlock; r0 += kRows) {
    __m512 c[kRows][2];
    for (int i = 0; i < kRows; ++i) {
      float* row = acc + (r0 + i) * kBlock;
      c[i][0] = s0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(row);
      c[i][1] = s0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(row + 16);
    }
    for (std::int64_t s = s0; s < s1; ++s) {
      // A[r0 + i][32 s + q] at a_step[i * ap.row + q]
      const std::uint16_t* a_step = ap.at + (s - s0) * ap.step + r0 * ap.row;
      const std::uint16_t* b_step = bp + (s - s0) * kStep;
      for (std::int64_t pair = 0; pair < kBlock / 2; ++pair) {
        if (r0 < 2 * kRows) {
          const std::int64_t line = ((r0 / kRows) * (s1 - s0) + s - s0) * 16 + pair;
          if (line < prefetch_lines) _mm_prefetch(prefetch + 64 * line, _MM_HINT_T0);
        } else if (s == s0) {
          const char* line = reinterpret_cast<const char*>(acc_next) + 64 * ((r0 / kRows - 2) * 32 + 2 * pair);
          _mm_prefetch(line, _MM_HINT_T0);
          _mm_prefetch(line + 64, _MM_HINT_T0);
        }
        const auto b0 = (__m512bh)_mm512_loadu_si512(b_step + pair * kBlock);
        const auto b1 = (__m512bh)_mm512_loadu_si512(b_step + kStep / 2 + pair * kBlock);
        for (int i = 0; i < kRows; ++i) {
          std::int32_t bits;
          std::memcpy(&bits, a_step + i * ap.row + 2 * pair, 4);
          const auto a = (__m512bh)_mm512_set1_epi32(bits);
          c[i][0] = _mm512_dpbf16_ps(c[i][0], a, b0);
          c[i][1] = _mm512_dpbf16_ps(c[i][1], a, b1);
        }
      }
    }
    if (out.c == nullptr) {
      for (int i = 0; i < kRows; ++i) {
        float* row = acc + (r0 + i) * kBlock;
        _mm512_storeu_ps(row, c[i][0]);
        _mm512_storeu_ps(row + 16, c[i][1]);
      }
      continue;
    }
    // Columns of C in the block: all 32, or a masked edge.
    const auto mask = [](std::int64_t cols) {
      return static_cast<__mmask16>(cols >= 16 ? 0xffff : cols <= 0 ? 0 : (1u << cols) - 1);
    };
    const __mmask16 m0 = mask(out.cols), m1 = mask(out.cols - 16);
    const __m512 alpha = _mm512_set1_ps(out.alpha), beta = _mm512_set1_ps(out.beta);
    for (int i = 0; i < kRows && r0 + i < out.rows; ++i) {
      float* row = out.c + (r0 + i) * out.ldc;
      __m512 v0 = _mm512_mul_ps(alpha, c[i][0]);
      if (out.read_c) v0 = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m0, row), v0);
      _mm512_mask_storeu_ps(row, m0, v0);
      if (m1 == 0) continue;  // no column past 16: row + 16 may be past C
      __m512 v1 = _mm512_mul_ps(alpha, c[i][1]);
      if (out.read_c) v1 = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m1, row + 16), v1);
      _mm512_mask_storeu_ps(row + 16, m1, v1);
    }
  }
}

// C = alpha * acc + beta * C (C not read when beta == 0) for the block's rows and columns in C:
// the AMX engine's last step for edge blocks and for alpha != 1 or beta != 0 (other blocks are
// stored from the tiles), which the AVX512-BF16 engine does from its registers.
void write_block(const float* acc, const BlockOut& out) {
  for (std::int64_t r = 0; r < out.rows; ++r) {
    float* row = out.c + r * out.ldc;
    const float* sum = acc + r * kBlock;
    if (!out.read_c) {
      for (std::int64_t q = 0; q < out.cols; ++q) row[q] = out.alpha * sum[q];
    } else {
      for (std::int64_t q = 0; q < out.cols; ++q) row[q] = out.alpha * sum[q] + out.beta * row[q];
    }
  }
}

// How the product is cut (in panels of 32 and steps of 32 along K), from the caches and the
// engine: on AMX a chunk of an A panel (32 rows x chunk steps) stays in L1 while the B panels of
// a column group pass; on either engine that group's chunk of B and the task's accumulators stay
// in L2 while the row group's panels use them.
struct AmxBlocking {
  std::int64_t chunk_steps, row_panels, col_panels;
};

AmxBlocking amx_blocking(Bf16Engine engine) {
  const CpuTopology& cpu = cpu_topology();
  // sysfs may be silent (containers): the sizes of every AMX CPU so far (48 KiB L1d, 2 MiB L2).
  const auto l1 = static_cast<std::int64_t>(cpu.l1d_bytes ? cpu.l1d_bytes : 48 << 10);
  const auto l2 = static_cast<std::int64_t>(cpu.l2_bytes ? cpu.l2_bytes : 2 << 20);
  AmxBlocking b{};
  // AMX: A's chunk within a third of L1 (the rest for B's piece and the block's accumulators):
  // the tile loads read it again for every block of the row. AVX512-BF16 takes A a pair at a
  // time (a broadcast) and streams B's piece from L2 four times a block whatever its size, so
  // what a chunk costs there is its end, the block's sums stored to the accumulators and loaded
  // again: K in chunks of 64 steps (2048) ran 2-4% faster than chunks from L1 (5 steps of a
  // 32 KiB L1) at 1024^3 and 2048^3 on two threads, and 128 steps no faster than 64 at 4096^3
  // (Zen 4).
  b.chunk_steps = engine == Bf16Engine::amx ? std::clamp<std::int64_t>(l1 / 3 / (kStep * 2), 2, 64) : 64;
  // A task's accumulators (4 KiB a block) and its column group's chunk of B within 5/8 of L2
  // (the rest for the pieces coming in from L3 and for C), as many row panels as column panels:
  // every piece of A or B from L3 serves that many blocks, so a square task asks L3 for the
  // fewest bytes per step (2 KiB / side for each operand).
  const std::int64_t b_piece = b.chunk_steps * kStep * 2;  // bytes of one B panel's chunk
  const std::int64_t budget = l2 * 5 / 8;
  const auto fits = [&](std::int64_t side) { return side * side * kBlock * kBlock * 4 + side * b_piece <= budget; };
  std::int64_t side = 1;
  while (side < 32 && fits(side + 1)) ++side;
  b.row_panels = b.col_panels = side;
  return b;
}

// [begin, end) of n things dealt into parts shares as evenly as they go (sizes differ by at most one).
struct Range {
  std::int64_t begin, end;
};
Range share_of(std::int64_t n, std::int64_t parts, std::int64_t i) { return {n * i / parts, n * (i + 1) / parts}; }

// Groups of at most side panels that n panels take.
std::int64_t groups(std::int64_t n, std::int64_t side) { return (n + side - 1) / side; }

// How the team splits the blocks: a grid of rows x cols rectangles, one a thread (rows * cols ==
// threads), each a share of the row panels times a share of the column panels. The grid is the
// one whose largest rectangle has the fewest blocks, and of those the one whose rectangles are
// the most square (the fewest panels read per block). Dealt as tasks in a fixed order instead, a
// team of two took 594 and 430 of a 1024^3 product's 1024 blocks with 11 x 11 tasks (a 1 MiB L2).
struct ThreadGrid {
  std::int64_t rows, cols;
};
ThreadGrid thread_grid(std::int64_t row_panels, std::int64_t col_panels, std::int64_t threads) {
  ThreadGrid best{threads, 1};
  std::int64_t best_blocks = -1, best_sides = 0;
  for (std::int64_t r = 1; r <= threads; ++r) {
    if (threads % r != 0) continue;
    const std::int64_t h = groups(row_panels, r), w = groups(col_panels, threads / r);
    if (best_blocks < 0 || h * w < best_blocks || (h * w == best_blocks && h + w < best_sides)) {
      best = {r, threads / r};
      best_blocks = h * w;
      best_sides = h + w;
    }
  }
  return best;
}

// One task: row panels [ib0, ib1) times column panels [jb0, jb1) of the product, over K in
// chunks, with its accumulators (a 32 x 32 f32 block each) at acc.
struct Task {
  const GemmArgs* g;
  const APanels* a;
  const Panels* b;
  std::int64_t ib0, ib1, jb0, jb1, steps, chunk_steps, acc_cols;
  float* acc;
  float* acc_of(std::int64_t ib, std::int64_t jb) const {
    return acc + ((ib - ib0) * acc_cols + (jb - jb0)) * kBlock * kBlock;
  }
  std::int64_t lines(std::int64_t s0) const {  // 64-byte lines in a panel's chunk from step s0
    return (std::min(steps, s0 + chunk_steps) - s0) * kStep * 2 / 64;
  }
};

// The task on AMX tiles. Within a chunk each A panel's piece stays in L1 while the group's B
// pieces (in L2) pass it; each call brings in a share of the next A piece (the next row panel's,
// or the next chunk's first) and of its column panel's piece of the next chunk. Where C = A B
// (alpha 1, beta 0) the last chunk stores full blocks straight from the tiles into C; the other
// blocks go through write_block.
void run_amx(const Task& t) {
  const GemmArgs& g = *t.g;
  const bool plain = g.alpha == 1 && g.beta == 0;  // C is the sums, bit for bit
  const auto direct = [&](std::int64_t ib, std::int64_t jb) {
    return plain && (ib + 1) * kBlock <= g.m && (jb + 1) * kBlock <= g.n;
  };
  const std::int64_t rows = t.ib1 - t.ib0, cols = t.jb1 - t.jb0;
  for (std::int64_t s0 = 0; s0 < t.steps; s0 += t.chunk_steps) {
    const std::int64_t s1 = std::min(t.steps, s0 + t.chunk_steps);
    const std::int64_t now = t.lines(s0), next = s1 < t.steps ? t.lines(s1) : 0;
    for (std::int64_t ib = t.ib0; ib < t.ib1; ++ib) {
      const std::uint16_t* ap = t.a->step(ib, s0);
      for (std::int64_t jb = t.jb0; jb < t.jb1; ++jb) {
        Ahead ahead;
        if (ib + 1 < t.ib1) {
          ahead[0] = share(t.a->step(ib + 1, s0), now, jb - t.jb0, cols);
        } else if (next > 0) {
          ahead[0] = share(t.a->step(t.ib0, s1), next, jb - t.jb0, cols);
        }
        if (next > 0) ahead[1] = share(t.b->step(jb, s1), next, ib - t.ib0, rows);
        float* acc = t.acc_of(ib, jb);
        const float* from = s0 == 0 ? nullptr : acc;
        if (s1 == t.steps && direct(ib, jb)) {
          chunk(ap, t.b->step(jb, s0), s1 - s0, from, static_cast<float*>(g.c) + ib * kBlock * g.ldc + jb * kBlock,
                g.ldc * 4, ahead);
        } else {
          chunk(ap, t.b->step(jb, s0), s1 - s0, from, acc, kBlock * 4, ahead);
        }
      }
    }
  }
  for (std::int64_t ib = t.ib0; ib < t.ib1; ++ib) {
    for (std::int64_t jb = t.jb0; jb < t.jb1; ++jb) {
      if (!direct(ib, jb)) write_block(t.acc_of(ib, jb), block_out(g, ib * kBlock, jb * kBlock));
    }
  }
}

// The task on the AVX512-BF16 engine, whose last chunk writes C itself. The next call's block:
// the group's next column panel, or its first for the next row panel, or the first block of the
// next chunk (none after the last).
void run_avx512bf16(const Task& t) {
  for (std::int64_t s0 = 0; s0 < t.steps; s0 += t.chunk_steps) {
    const std::int64_t s1 = std::min(t.steps, s0 + t.chunk_steps);
    for (std::int64_t ib = t.ib0; ib < t.ib1; ++ib) {
      const ARows ap{t.a->step(ib, s0), t.a->row_stride(ib), t.a->step_stride(ib)};
      for (std::int64_t jb = t.jb0; jb < t.jb1; ++jb) {
        const std::uint16_t* bp = t.b->step(jb, s0);
        BlockOut out;
        if (s1 == t.steps) out = block_out(*t.g, ib * kBlock, jb * kBlock);
        const bool next_chunk = jb + 1 == t.jb1 && ib + 1 == t.ib1;
        const std::int64_t next_jb = jb + 1 < t.jb1 ? jb + 1 : t.jb0;
        const std::int64_t next_ib = jb + 1 < t.jb1 ? ib : ib + 1 < t.ib1 ? ib + 1 : t.ib0;
        const std::int64_t next_s0 = next_chunk ? s1 : s0;
        const std::int64_t next_steps = std::min(t.steps, next_s0 + t.chunk_steps) - next_s0;
        chunk_avx512bf16(ap, bp, next_s0 < t.steps ? t.b->step(next_jb, next_s0) : bp, next_steps,
                         t.acc_of(next_ib, next_jb), s0, s1, t.acc_of(ib, jb), out);
      }
    }
  }
}

}  // namespace

bool amx_bf16(std::string* why) {
  static const std::string refusal = amx_refusal();
  if (why != nullptr) *why = refusal;
  return refusal.empty();
}

void matmul_amx_bf16(const GemmArgs& g, Bf16Engine engine) {
  if (g.ab_type != DType::bf16 || g.c_type != DType::f32) {
    throw Unsupported("openmp: the tensor_core tier takes bf16 inputs with an f32 result");
  }
  const bool amx = engine == Bf16Engine::amx;
  if (std::string why; amx && !amx_bf16(&why)) throw Unsupported("openmp: no tensor_core tier here: " + why);
  if (!amx && !host::cpu_has_avx512bf16()) throw Unsupported("openmp: this CPU has no AVX512-BF16");
  if (g.k == 0) {  // no products: C = beta C (with no chunk, the loops below would not write C)
    auto* c = static_cast<float*>(g.c);
    for (std::int64_t i = 0; i < g.m; ++i) {
      for (std::int64_t j = 0; j < g.n; ++j) c[i * g.ldc + j] = g.beta == 0 ? 0.0f : float(g.beta) * c[i * g.ldc + j];
    }
    return;
  }
  const std::int64_t kp = (g.k + kBlock - 1) / kBlock * kBlock;
  const std::int64_t row_panels = (g.m + kBlock - 1) / kBlock, col_panels = (g.n + kBlock - 1) / kBlock;
  // The AVX512-BF16 engine reads A's full row panels in place where every step is whole (a
  // partial last step or panel would read past A: those are packed, with their zeros).
  const std::int64_t direct = !amx && g.trans_a == Transpose::no && g.k % kBlock == 0 ? g.m / kBlock : 0;
  const PackBuffer<std::uint16_t> a(PackSlot::a_blocks, static_cast<std::size_t>((row_panels - direct) * kBlock * kp));
  const PackBuffer<std::uint16_t> b(PackSlot::b_blocks, static_cast<std::size_t>(col_panels * kBlock * kp));
  const bool parallel = g.m * g.n * g.k >= std::int64_t(1) << 18;
  const int threads = parallel ? std::max(omp_get_max_threads(), 1) : 1;
  // Each thread owns a rectangle of the blocks (thread_grid), which it covers with tasks of at
  // most the caches' square side, every task in it within one panel of the others' shape.
  static const AmxBlocking amx_caches = amx_blocking(Bf16Engine::amx);
  static const AmxBlocking avx512_caches = amx_blocking(Bf16Engine::avx512bf16);
  const AmxBlocking& caches = amx ? amx_caches : avx512_caches;
  const std::int64_t steps = kp / kBlock;
  const APanels a_panels{Panels{a.data, steps, direct}, reinterpret_cast<const std::uint16_t*>(g.a), g.lda, direct};
  const Panels b_panels{b.data, steps};
  // Each thread's accumulators (32 x 32 f32 per block of a task), across its tasks' chunks of K:
  // allocated here, as an exception may not leave a parallel region.
  const std::int64_t acc_rows = std::min(caches.row_panels, row_panels);
  const std::int64_t acc_cols = std::min(caches.col_panels, col_panels);
  const std::int64_t per_thread = acc_rows * acc_cols * kBlock * kBlock;
  const PackBuffer<float> accumulators(PackSlot::accumulators, static_cast<std::size_t>(per_thread * threads));
#pragma omp parallel if (parallel) num_threads(threads)
  {
    const std::int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
    const ThreadGrid grid = thread_grid(row_panels, col_panels, team);
    // Where the grid is one row of rectangles and A is read in place, a thread reads no panel but
    // A's and the B panels of its own columns: it packs each column group's just before the
    // group's first task (into L2, and with no barrier: 1-3% faster than the team packing first
    // at 1024^3 and 2048^3 on two threads, Zen 4). Otherwise the team packs A and B between them
    // first. (own_b is the same on every thread, as the barrier needs.)
    const bool own_b = grid.rows == 1 && direct == row_panels;
    if (!own_b) {
#pragma omp for schedule(static) nowait
      for (std::int64_t ib = direct; ib < row_panels; ++ib) pack_a(g, ib, a_panels.packed);
      const Range mine = share_of(col_panels, team, t);
      pack_b_range(g, mine.begin, mine.end, b_panels);
#pragma omp barrier
    }
    // Tile state is per thread: each one configures its tiles, and releases them when done.
    const TileConfig config = tile_config();
    if (amx) _tile_loadconfig(&config);
    float* const acc = accumulators.data + per_thread * t;
    const Range rows = share_of(row_panels, grid.rows, t / grid.cols);
    const Range cols = share_of(col_panels, grid.cols, t % grid.cols);
    const std::int64_t row_groups = groups(rows.end - rows.begin, caches.row_panels);
    const std::int64_t col_groups = groups(cols.end - cols.begin, caches.col_panels);
    for (std::int64_t rg = 0; rg < row_groups; ++rg) {
      const Range tr = share_of(rows.end - rows.begin, row_groups, rg);
      for (std::int64_t cg = 0; cg < col_groups; ++cg) {
        const Range tc = share_of(cols.end - cols.begin, col_groups, cg);
        if (own_b && rg == 0) pack_b_range(g, cols.begin + tc.begin, cols.begin + tc.end, b_panels);
        const Task task{&g,
                        &a_panels,
                        &b_panels,
                        rows.begin + tr.begin,
                        rows.begin + tr.end,
                        cols.begin + tc.begin,
                        cols.begin + tc.end,
                        steps,
                        caches.chunk_steps,
                        acc_cols,
                        acc};
        if (amx) {
          run_amx(task);
        } else {
          run_avx512bf16(task);
        }
      }
    }
    if (amx) _tile_release();
  }
}

}  // namespace tandem::openmp
