// The openmp backend's copies (host memory is its device memory): split over the threads, and
// past the last-level cache written around it with streaming stores. Plain SSE2 on every x86
// CPU: a copy is bound by memory, not by the vector width (the kernels per ISA: kernels.inl).
#include <omp.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "openmp_backend.hpp"

namespace tandem::openmp {

namespace {

#if defined(__SSE2__)
// A copy whose 64-byte lines of d go out with streaming stores, each thread's part in `runs`
// interleaved runs (as map_lines); the unaligned head and tail by memcpy.
void streamed_copy(unsigned char* d, const unsigned char* s, std::size_t bytes, std::int64_t runs) {
  const std::size_t head = std::min(bytes, (64 - reinterpret_cast<std::uintptr_t>(d) % 64) % 64);
  std::memcpy(d, s, head);
  const auto lines = static_cast<std::int64_t>((bytes - head) / 64);
  unsigned char* dl = d + head;
  const unsigned char* sl = s + head;
#pragma omp parallel
  {
    const std::int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
    const std::int64_t first = lines * me / threads, last = lines * (me + 1) / threads;
    const std::int64_t r = std::max<std::int64_t>(runs, 1), run = (last - first) / r;
    auto line = [&](std::int64_t l) {
      for (int k = 0; k < 64; k += 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(sl + l * 64 + k));
        _mm_stream_si128(reinterpret_cast<__m128i*>(dl + l * 64 + k), v);
      }
    };
    for (std::int64_t j = 0; j < run; ++j) {
      for (std::int64_t k = 0; k < r; ++k) line(first + k * run + j);
    }
    for (std::int64_t l = first + r * run; l < last; ++l) line(l);
    _mm_sfence();
  }
  const std::size_t done = head + static_cast<std::size_t>(lines) * 64;
  std::memcpy(d + done, s + done, bytes - done);
}
#endif

// memmove semantics: overlapping ranges (and small copies) go to one thread. From the f32 size
// from which the kernels run on the team (parallel_from(): 128 KiB by the table) each thread
// copies the share it will then compute on, so that the data is in its own cache: copied by one
// thread, the other thread's half comes from that thread's cache instead (an upload + sum of 64K
// floats took three times as long).
void parallel_copy(void* dst, const void* src, std::size_t bytes, std::size_t stream_from) {
  const std::size_t parallel_bytes = parallel_from() * sizeof(float);
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (bytes < parallel_bytes || (d < s + bytes && s < d + bytes)) {
    std::memmove(dst, src, bytes);
    return;
  }
#if defined(__SSE2__)
  // Source and destination together past the last-level cache: written around it as the other
  // large outputs are (a third faster than memcpy).
  if (2 * bytes >= stream_from && store_tuning().stream) {
    streamed_copy(d, s, bytes, store_tuning().runs);
    return;
  }
#else
  (void)stream_from;
#endif
#pragma omp parallel
  {
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    const auto nt = static_cast<std::size_t>(omp_get_num_threads());
    const std::size_t chunk = ((bytes + nt - 1) / nt + 63) / 64 * 64;
    const std::size_t begin = t * chunk;
    if (begin < bytes) std::memcpy(d + begin, s + begin, std::min(chunk, bytes - begin));
  }
}

}  // namespace

void OpenMPBackend::copy_to_device(Queue q, void* d_dst, const void* h_src, std::size_t bytes) {
  const TeamScope team = enter(q);
  parallel_copy(d_dst, h_src, bytes, stream_from_bytes_);
}

void OpenMPBackend::copy_to_host(Queue q, void* h_dst, const void* d_src, std::size_t bytes) {
  const TeamScope team = enter(q);
  parallel_copy(h_dst, d_src, bytes, stream_from_bytes_);
}

void OpenMPBackend::copy_on_device(Queue q, void* d_dst, const void* d_src, std::size_t bytes) {
  const TeamScope team = enter(q);
  parallel_copy(d_dst, d_src, bytes, stream_from_bytes_);
}

}  // namespace tandem::openmp
