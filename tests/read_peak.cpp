// The readers' memory stays within their cap: /dev/zero read past a 128 MiB cap, and a gzip
// stream that inflates to 256 MiB of zeros under the same cap, are each refused with a DataError
// while the process's peak resident memory grows by less than the cap and a half. (A buffer that
// doubled as it grew held twice the cap, three times while it moved.) One process, so the peak
// is this program's own; exits 1 with what it saw otherwise.
#include <sys/resource.h>

#include <cstdio>
#include <string>
#include <vector>

#ifdef TANDEM_TEST_HAVE_ZLIB
#include <zlib.h>
#endif

#include "tandem/data.hpp"
#include "tandem/errors.hpp"

// AddressSanitizer keeps freed memory in a quarantine (256 MiB by default) and adds its shadow:
// the peak is not the readers' there, so only the refusals are checked.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPeakMeaningful = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kPeakMeaningful = false;
#else
constexpr bool kPeakMeaningful = true;
#endif
#else
constexpr bool kPeakMeaningful = true;
#endif

namespace {

constexpr std::size_t kCap = std::size_t(128) << 20;

std::size_t peak_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<std::size_t>(u.ru_maxrss) * 1024;  // KiB on Linux
}

bool refused(const char* what, auto&& read) {
  try {
    (void)read();
  } catch (const tandem::DataError& e) {
    std::printf("%s: refused: %s\n", what, e.what());
    return true;
  }
  std::printf("%s: read, not refused\n", what);
  return false;
}

#ifdef TANDEM_TEST_HAVE_ZLIB
// A gzip stream of `bytes` zeros (about a thousandth of that compressed).
std::vector<unsigned char> gzip_zeros(std::size_t bytes) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY);
  std::vector<unsigned char> zeros(std::size_t(1) << 20, 0), out, chunk(std::size_t(1) << 16);
  for (std::size_t done = 0; done < bytes; done += zeros.size()) {
    z.next_in = zeros.data();
    z.avail_in = static_cast<uInt>(zeros.size());
    const int flush = done + zeros.size() >= bytes ? Z_FINISH : Z_NO_FLUSH;
    do {
      z.next_out = chunk.data();
      z.avail_out = static_cast<uInt>(chunk.size());
      deflate(&z, flush);
      out.insert(out.end(), chunk.data(), chunk.data() + (chunk.size() - z.avail_out));
    } while (z.avail_out == 0);
  }
  deflateEnd(&z);
  return out;
}
#endif

}  // namespace

int main() {
  const std::size_t base = peak_bytes();
  const std::size_t bound = kCap + kCap / 2;
  bool ok = refused("/dev/zero past 128 MiB", [] { return tandem::data::read_file("/dev/zero", kCap); });
#ifdef TANDEM_TEST_HAVE_ZLIB
  const std::vector<unsigned char> bomb = gzip_zeros(2 * kCap);
  std::printf("a gzip stream of %zu bytes that inflates to 256 MiB\n", bomb.size());
  ok = refused("the gzip stream past 128 MiB", [&] { return tandem::data::decompress(bomb, "bomb.gz", kCap); }) && ok;
#endif
  const std::size_t grew = peak_bytes() - base;
  std::printf("peak resident memory grew by %zu MiB (bound %zu MiB%s)\n", grew >> 20, bound >> 20,
              kPeakMeaningful ? "" : "; not judged under AddressSanitizer, whose quarantine keeps freed memory");
  return ok && (grew < bound || !kPeakMeaningful) ? 0 : 1;
}
