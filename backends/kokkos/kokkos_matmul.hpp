// The kokkos backend's matmul tiers: naive (RangePolicy, one element of C per index), tiled
// (TeamPolicy, 16 x 16 tiles of op(A) and op(B) in level-0 team scratch) and, on host execution
// spaces, register_blocked (TeamPolicy, packed panels in level-1 scratch, micro-tiles of C in
// registers). Included by kokkos_backend.cpp only, after kokkos_kernels.hpp.
#pragma once

#include "kokkos_kernels.hpp"

namespace tandem::kokkos_backend {

// ---- matmul ----
// A GEMM's arguments as the kernels read them (a KOKKOS_LAMBDA captures it by value): op(A) and
// op(B) element by element in the compute type C, and C's element written with alpha and beta.
template <class C, class TA, class TC>
struct Gemm {
  const TA* a;
  const TA* b;
  TC* c;
  std::int64_t m, n, k, lda, ldb, ldc;
  bool ta, tb;
  C alpha, beta;
  explicit Gemm(const GemmArgs& g)
      : a(static_cast<const TA*>(g.a)),
        b(static_cast<const TA*>(g.b)),
        c(static_cast<TC*>(g.c)),
        m(g.m),
        n(g.n),
        k(g.k),
        lda(g.lda),
        ldb(g.ldb),
        ldc(g.ldc),
        ta(g.trans_a == Transpose::yes),
        tb(g.trans_b == Transpose::yes),
        alpha(C(g.alpha)),
        beta(C(g.beta)) {}
  KOKKOS_INLINE_FUNCTION C op_a(std::int64_t i, std::int64_t p) const {
    return to<C>(ta ? a[p * lda + i] : a[i * lda + p]);
  }
  KOKKOS_INLINE_FUNCTION C op_b(std::int64_t p, std::int64_t j) const {
    return to<C>(tb ? b[j * ldb + p] : b[p * ldb + j]);
  }
  // C(i, j) = alpha * sum + beta * C(i, j); C is not read when beta is 0.
  KOKKOS_INLINE_FUNCTION void store(std::int64_t i, std::int64_t j, C sum) const {
    TC& cij = c[i * ldc + j];
    cij = TC(beta == C(0) ? alpha * sum : alpha * sum + beta * C(cij));
  }
};

// naive: one thread per element of C, the dot product over k in the compute type C.
template <class C, class TA, class TC>
void matmul_naive(const GemmArgs& g) {
  const Gemm<C, TA, TC> G(g);
  Kokkos::parallel_for(
      "tandem::matmul_naive", Range(0, g.m * g.n), KOKKOS_LAMBDA(std::int64_t e) {
        const std::int64_t i = e / G.n, j = e % G.n;
        C acc = 0;
        for (std::int64_t p = 0; p < G.k; ++p) acc += G.op_a(i, p) * G.op_b(p, j);
        G.store(i, j, acc);
      });
}

// tiled: one team per kTile x kTile tile of C; each step loads a tile of op(A) and of op(B) into
// team scratch memory, and every thread of the team accumulates its elements of C from there.
// Correct for any team size (Serial's is 1): threads stride over the tile's elements.
constexpr int kTile = 16;
template <class C, class TA, class TC>
void matmul_tiled(const GemmArgs& g) {
  using Team = Kokkos::TeamPolicy<Exec>;
  using Scratch = Kokkos::View<C**, Exec::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const Gemm<C, TA, TC> G(g);
  const std::int64_t m = g.m, n = g.n, k = g.k;
  const std::int64_t tiles_m = (m + kTile - 1) / kTile, tiles_n = (n + kTile - 1) / kTile;
  const std::size_t scratch = 2 * Scratch::shmem_size(kTile, kTile);
  const Team policy =
      Team(static_cast<int>(tiles_m * tiles_n), Kokkos::AUTO).set_scratch_size(0, Kokkos::PerTeam(scratch));
  Kokkos::parallel_for(
      "tandem::matmul_tiled", policy, KOKKOS_LAMBDA(const typename Team::member_type& team) {
        const std::int64_t ti = team.league_rank() / tiles_n, tj = team.league_rank() % tiles_n;
        Scratch as(team.team_scratch(0), kTile, kTile), bs(team.team_scratch(0), kTile, kTile);
        // Each thread's share of the tile's kTile * kTile outputs (all of them with one thread).
        constexpr int kMostPerThread = kTile * kTile;
        C acc[kMostPerThread];
        const int threads = team.team_size(), me = team.team_rank();
        for (int e = me, u = 0; e < kTile * kTile; e += threads, ++u) acc[u] = 0;
        for (std::int64_t p0 = 0; p0 < k; p0 += kTile) {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, kTile * kTile), [&](int e) {
            const int r = e / kTile, q = e % kTile;
            const std::int64_t i = ti * kTile + r, j = tj * kTile + r, p = p0 + q;
            as(r, q) = i < m && p < k ? G.op_a(i, p) : C(0);
            bs(r, q) = j < n && p < k ? G.op_b(p, j) : C(0);  // bs(j, p): op(B) transposed
          });
          team.team_barrier();
          for (int e = me, u = 0; e < kTile * kTile; e += threads, ++u) {
            const int r = e / kTile, q = e % kTile;
            C s = acc[u];
            for (int p = 0; p < kTile; ++p) s += as(r, p) * bs(q, p);
            acc[u] = s;
          }
          team.team_barrier();
        }
        for (int e = me, u = 0; e < kTile * kTile; e += threads, ++u) {
          const std::int64_t i = ti * kTile + e / kTile, j = tj * kTile + e % kTile;
          if (i < m && j < n) G.store(i, j, acc[u]);
        }
      });
}

// register_blocked (host execution spaces): one team (of one thread: a CPU core) per mc x nc
// block of C. For each kc slice of k the team packs op(A)'s block into mr-row panels and op(B)'s
// into nr-column panels in its scratch, converting f16/bf16 to the compute type and padding the
// edges with zeros; then each mr x nr micro-tile of the block is accumulated in registers through
// the slice (a loop of fixed trip counts the compiler vectorises for the ISA Kokkos compiles for)
// and added into the block's sums, kept in scratch until C is written once with alpha and beta.
// Level-1 scratch: the panels and sums (512 KiB for f32) exceed level 0's 32 KiB.
// The micro-tile is 4 x (32 bytes of C): larger tiles make GCC's vectoriser spill the sums to the
// stack, which costs more than the tile saves; the blocks are as large as keep the B panel in L2,
// so that packing is amortised over more of C.
template <class C>
struct Blocking {
  static constexpr int mr = 4, nr = int(32 / sizeof(C));
  static constexpr std::int64_t mc = 128, nc = 256, kc = 256;  // Zen 3 EPYC, 1024^3: 52 GFLOP/s, 64 x 128: 43
};
template <class C>
KOKKOS_INLINE_FUNCTION void micro_tile(std::int64_t kb, const C* ap, const C* bp, C* sums, std::int64_t ld) {
  constexpr int kMr = Blocking<C>::mr, kNr = Blocking<C>::nr;
  C acc[kMr][kNr] = {};
  for (std::int64_t p = 0; p < kb; ++p) {
    for (int r = 0; r < kMr; ++r) {
      const C a = ap[p * kMr + r];
      for (int q = 0; q < kNr; ++q) acc[r][q] += a * bp[p * kNr + q];
    }
  }
  for (int r = 0; r < kMr; ++r) {
    for (int q = 0; q < kNr; ++q) sums[r * ld + q] += acc[r][q];
  }
}
template <class C, class TA, class TC>
void matmul_register_blocked(const GemmArgs& g) {
  using B = Blocking<C>;
  using Team = Kokkos::TeamPolicy<Exec>;
  using Scratch = Kokkos::View<C*, Exec::scratch_memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const Gemm<C, TA, TC> G(g);
  const std::int64_t m = g.m, n = g.n, k = g.k;
  const std::int64_t tiles_n = (n + B::nc - 1) / B::nc, tiles = (m + B::mc - 1) / B::mc * tiles_n;
  const std::size_t scratch =
      Scratch::shmem_size(B::mc * B::kc) + Scratch::shmem_size(B::kc * B::nc) + Scratch::shmem_size(B::mc * B::nc);
  const Team policy = Team(static_cast<int>(tiles), 1).set_scratch_size(1, Kokkos::PerTeam(scratch));
  Kokkos::parallel_for(
      "tandem::matmul_register_blocked", policy, KOKKOS_LAMBDA(const typename Team::member_type& team) {
        const std::int64_t i0 = team.league_rank() / tiles_n * B::mc, j0 = team.league_rank() % tiles_n * B::nc;
        const std::int64_t mb = m - i0 < B::mc ? m - i0 : B::mc, nb = n - j0 < B::nc ? n - j0 : B::nc;
        const std::int64_t panels_m = (mb + B::mr - 1) / B::mr, panels_n = (nb + B::nr - 1) / B::nr;
        Scratch ap(team.team_scratch(1), B::mc * B::kc), bp(team.team_scratch(1), B::kc * B::nc),
            sums(team.team_scratch(1), B::mc * B::nc);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, int(B::mc * B::nc)), [&](int e) { sums(e) = 0; });
        for (std::int64_t p0 = 0; p0 < k; p0 += B::kc) {
          const std::int64_t kb = k - p0 < B::kc ? k - p0 : B::kc;
          team.team_barrier();
          // Panel ir of op(A)'s block: rows ir * mr.., element (r, p) at ap[ir * mr * kc + p * mr + r].
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, int(panels_m)), [&](int ir) {
            C* dst = ap.data() + ir * B::mr * B::kc;
            const std::int64_t r0 = i0 + ir * B::mr;
            if (r0 + B::mr <= m) {
              for (std::int64_t p = 0; p < kb; ++p) {
                for (int r = 0; r < B::mr; ++r) dst[p * B::mr + r] = G.op_a(r0 + r, p0 + p);
              }
            } else {
              for (std::int64_t p = 0; p < kb; ++p) {
                for (int r = 0; r < B::mr; ++r) dst[p * B::mr + r] = r0 + r < m ? G.op_a(r0 + r, p0 + p) : C(0);
              }
            }
          });
          // Panel jr of op(B)'s slice: columns jr * nr.., element (p, q) at bp[jr * nr * kc + p * nr + q].
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, int(panels_n)), [&](int jr) {
            C* dst = bp.data() + jr * B::nr * B::kc;
            const std::int64_t q0 = j0 + jr * B::nr;
            if (q0 + B::nr <= n) {
              for (std::int64_t p = 0; p < kb; ++p) {
                for (int q = 0; q < B::nr; ++q) dst[p * B::nr + q] = G.op_b(p0 + p, q0 + q);
              }
            } else {
              for (std::int64_t p = 0; p < kb; ++p) {
                for (int q = 0; q < B::nr; ++q) dst[p * B::nr + q] = q0 + q < n ? G.op_b(p0 + p, q0 + q) : C(0);
              }
            }
          });
          team.team_barrier();
          // Panel rows fastest: one panel of op(B) (kc x nr, 8 KiB for f32) stays in L1 across them.
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, int(panels_m * panels_n)), [&](int t) {
            const std::int64_t ir = t % panels_m, jr = t / panels_m;
            micro_tile<C>(kb, ap.data() + ir * B::mr * B::kc, bp.data() + jr * B::nr * B::kc,
                          sums.data() + ir * B::mr * B::nc + jr * B::nr, B::nc);
          });
        }
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, int(mb)), [&](int r) {
          for (std::int64_t q = 0; q < nb; ++q) G.store(i0 + r, j0 + q, sums(r * B::nc + q));
        });
      });
}

}  // namespace tandem::kokkos_backend
