// The scan's in-cache block loop, written once over a vector-traits struct W (width, load, store,
// stream, add, splat, first, shift<k>, last, scan) and included inside an anonymous namespace by
// scan.inl (SSE2 traits) and scan_avx512.cpp (AVX-512 traits), so each file's copy is its own.
// Scans whole blocks of four vectors from the start of x into out, adding `running` and leaving
// the last prefix in it; returns how many elements it did. With `streamed`, out must be aligned
// to the vector width.
template <class W, class Acc, class T>
std::int64_t scan_blocks(bool inclusive, const T* x, T* out, std::int64_t n, Acc& running, bool streamed) {
  using V = typename W::V;
  constexpr std::int64_t kBlock = 4 * W::width;  // four vectors per step
  V carry = W::splat(running);
  std::int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    // Each vector scanned on its own; their totals t combined as a tree, so that only one
    // addition per step waits on the running total (carry).
    V s[4], t[4];
    for (int u = 0; u < 4; ++u) {
      s[u] = W::scan(W::load(x + i + u * W::width));
      t[u] = W::last(s[u]);
    }
    const V t01 = W::add(t[0], t[1]);
    const V before2 = W::add(carry, t01);
    const V before[4] = {carry, W::add(carry, t[0]), before2, W::add(before2, t[2])};
    carry = W::add(carry, W::add(t01, W::add(t[2], t[3])));
    for (int u = 0; u < 4; ++u) {
      // Exclusive: the inclusive prefixes shifted up one lane (0 enters lane 0).
      const V value = W::add(before[u], inclusive ? s[u] : W::template shift<1>(s[u]));
      if (streamed) {
        W::stream(out + i + u * W::width, value);
      } else {
        W::store(out + i + u * W::width, value);
      }
    }
  }
  running = W::first(carry);
  return i;
}
