// The scan's in-cache block loop, written once over a vector-traits struct W (width, load, store,
// stream, add, splat, first, shift<k>, last, scan) and included inside an anonymous namespace by
// scan.inl (SSE2 traits), vector_avx2.cpp and vector_avx512.cpp, so each file's copy is its own.
// The next piece's lines are asked for pf.bytes ahead into L1 or L2, or not at all (ReadPrefetch,
// calibrated per CPU: which distance and cache pays differs between CPUs, and none can lose).

// One step: four vectors of x scanned into out after `carry`, which moves on by their total;
// with kAhead, two vectors from each of `ahead0` and `ahead1` (the two halves of the next piece,
// read from memory while this one is scanned from the cache) are added into acc.
template <class W, bool kAhead, int kLocality, class T>
inline void scan_step(bool inclusive, const T* x, T* out, bool streamed, typename W::V& carry, const T* ahead0,
                      const T* ahead1, std::intptr_t distance, typename W::V (&acc)[4]) {
  using V = typename W::V;
  // Each vector scanned on its own; their totals t combined as a tree, so that only one addition
  // per step waits on the running total (carry).
  V s[4], t[4];
  if constexpr (kAhead && kLocality > 0) {  // the next piece comes from memory: ask for its lines early
    constexpr int kBytes = 2 * W::width * static_cast<int>(sizeof(T));
    for (const T* ahead : {ahead0, ahead1}) {
      const char* early = reinterpret_cast<const char*>(ahead) + distance;
      for (int b = 0; b < kBytes; b += 64) __builtin_prefetch(early + b, 0, kLocality);  // 3: L1, 2: L2
    }
  }
  for (int u = 0; u < 4; ++u) {
    s[u] = W::scan(W::load(x + u * W::width));
    t[u] = W::last(s[u]);
    if constexpr (kAhead) acc[u] = W::add(acc[u], W::load((u < 2 ? ahead0 : ahead1) + (u % 2) * W::width));
  }
  const V t01 = W::add(t[0], t[1]);
  const V before2 = W::add(carry, t01);
  const V before[4] = {carry, W::add(carry, t[0]), before2, W::add(before2, t[2])};
  carry = W::add(carry, W::add(t01, W::add(t[2], t[3])));
  for (int u = 0; u < 4; ++u) {
    // Exclusive: the inclusive prefixes shifted up one lane (0 enters lane 0).
    const V value = W::add(before[u], inclusive ? s[u] : W::template shift<1>(s[u]));
    if (streamed) {
      W::stream(out + u * W::width, value);
    } else {
      W::store(out + u * W::width, value);
    }
  }
}

// Scans whole blocks of four vectors from the start of x into out, adding `running` and leaving
// the last prefix in it; returns how many elements it did. Meanwhile it sums ahead[0, ahead_n)
// into ahead_sum, as two streams (its halves, read side by side: more requests in flight than one
// stream), when it has blocks for at least
// one step of them, and then leaves ahead_n 0. With `streamed`, out must be aligned to the vector
// width.
template <class W, int kLocality, class Acc, class T>
std::int64_t scan_blocks_to(bool inclusive, const T* x, T* out, std::int64_t n, Acc& running, bool streamed,
                            std::intptr_t distance, const T*& ahead, std::int64_t& ahead_n, Acc& ahead_sum) {
  using V = typename W::V;
  constexpr std::int64_t kBlock = 4 * W::width;  // four vectors per step
  V carry = W::splat(running);
  V acc[4] = {W::splat(0), W::splat(0), W::splat(0), W::splat(0)};
  const std::int64_t half = ahead_n / 2;  // ahead[0, half) and ahead[half, ahead_n): kBlock / 2 of each per step
  const std::int64_t fused = std::min(n / kBlock, half / (kBlock / 2)) * kBlock;
  std::int64_t i = 0;
  for (; i < fused; i += kBlock) {
    scan_step<W, true, kLocality>(inclusive, x + i, out + i, streamed, carry, ahead + i / 2, ahead + half + i / 2,
                                  distance, acc);
  }
  for (; i + kBlock <= n; i += kBlock) {
    scan_step<W, false, kLocality>(inclusive, x + i, out + i, streamed, carry, ahead, ahead, distance, acc);
  }
  running = W::first(carry);
  if (fused > 0) {
    T lanes[W::width];
    W::store(lanes, W::add(W::add(acc[0], acc[1]), W::add(acc[2], acc[3])));
    for (const T l : lanes) ahead_sum += Acc(l);
    // What the steps left of each half (a few elements unless x ran out first).
    for (std::int64_t j = fused / 2; j < half; ++j) ahead_sum += Acc(ahead[j]);
    for (std::int64_t j = half + fused / 2; j < ahead_n; ++j) ahead_sum += Acc(ahead[j]);
    ahead += ahead_n;
    ahead_n = 0;
  }
  return i;
}

// scan_blocks_to with the prefetch's cache level as a constant (prefetch instructions take it so;
// 0: none).
template <class W, class Acc, class T>
std::int64_t scan_blocks(bool inclusive, const T* x, T* out, std::int64_t n, Acc& running, bool streamed,
                         ReadPrefetch pf, const T*& ahead, std::int64_t& ahead_n, Acc& ahead_sum) {
  if (pf.bytes == 0) {
    return scan_blocks_to<W, 0>(inclusive, x, out, n, running, streamed, 0, ahead, ahead_n, ahead_sum);
  }
  return pf.l2 ? scan_blocks_to<W, 2>(inclusive, x, out, n, running, streamed, pf.bytes, ahead, ahead_n, ahead_sum)
               : scan_blocks_to<W, 3>(inclusive, x, out, n, running, streamed, pf.bytes, ahead, ahead_n, ahead_sum);
}
