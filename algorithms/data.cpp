// Data loading: gzip (zlib), MNIST IDX; split, standardisation and the portable generator (CSV:
// data_csv.cpp).
#include "tandem/data.hpp"

#ifdef TANDEM_HAVE_ZLIB
#include <zlib.h>
#endif

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <numbers>

#include "../core/host_memory.hpp"
#include "loader_memory.hpp"
#include "tandem/detail/checked.hpp"
#include "tandem/errors.hpp"

namespace tandem::data {
namespace loaders {

void out_of_memory(const std::string& path, std::size_t held) {
  throw OutOfMemory(held, host::available_memory_bytes(), "host (reading " + path + ")");
}

}  // namespace loaders

namespace {

[[noreturn]] void fail(const std::string& source, const std::string& what) { throw DataError(source + ": " + what); }

// Bytes gathered in chunks of at most 1 MiB and joined once at the end: memory grows with the
// data, never past it by more than a chunk (a doubling vector holds up to twice the cap, and
// three times while it moves), and the readers stop one chunk past their cap.
class Chunks {
 public:
  static constexpr std::size_t kChunk = std::size_t(1) << 20;
  // Room for n <= kChunk more bytes at the end.
  unsigned char* room(std::size_t n) {
    if (pieces_.empty() || pieces_.back().capacity - pieces_.back().size < n) {
      const std::size_t capacity = std::max(n, kChunk);
      pieces_.push_back({std::make_unique_for_overwrite<unsigned char[]>(capacity), 0, capacity});
    }
    Piece& p = pieces_.back();
    unsigned char* at = p.data.get() + p.size;
    p.size += n;
    return at;
  }
  // The last room(asked) held only n of the bytes it asked for.
  void used(std::size_t asked, std::size_t n) {
    pieces_.back().size -= asked - n;
    size_ += n;
  }
  std::size_t size() const { return size_; }
  // The bytes appended to `out`; each piece is freed as soon as it is copied, and out's new
  // pages are touched only as they are written, so the peak stays about the data plus a chunk.
  void append_to(std::vector<unsigned char>& out) {
    out.reserve(out.size() + size_);
    for (Piece& p : pieces_) {
      out.insert(out.end(), p.data.get(), p.data.get() + p.size);
      p.data.reset();
    }
  }
  std::vector<unsigned char> join() {
    std::vector<unsigned char> out;
    append_to(out);
    return out;
  }

 private:
  struct Piece {
    std::unique_ptr<unsigned char[]> data;
    std::size_t size, capacity;
  };
  std::vector<Piece> pieces_;
  std::size_t size_ = 0;
};

[[noreturn]] void out_of_memory(const std::string& path, std::size_t held) {
  loaders::out_of_memory(path, held + Chunks::kChunk);
}

#ifdef TANDEM_HAVE_ZLIB
// More than `limit` inflated is refused: a small corrupt or hostile file must not take the
// machine's memory. Data sets beyond it can be read uncompressed.
std::vector<unsigned char> inflate_gzip(const std::vector<unsigned char>& in, const std::string& path,
                                        std::size_t limit) {
  Chunks out;
  z_stream z{};
  // 16 + MAX_WBITS: gzip wrapper only. Concatenated members (as `cat a.gz b.gz` makes) are
  // inflated one after the other, as gzip -d does.
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) fail(path, "zlib could not start inflating");
  std::size_t fed = 0;  // bytes of `in` handed to zlib so far
  const auto feed = [&] {
    const std::size_t n = std::min<std::size_t>(in.size() - fed, std::numeric_limits<uInt>::max());
    z.next_in = const_cast<unsigned char*>(in.data() + fed);
    z.avail_in = static_cast<uInt>(n);
    fed += n;
  };
  const auto offset = [&] { return fed - z.avail_in; };  // bytes of `in` zlib has consumed
  try {
    feed();
    for (;;) {
      constexpr std::size_t kStep = std::size_t(1) << 16;
      z.next_out = out.room(kStep);
      z.avail_out = static_cast<uInt>(kStep);
      const int rc = inflate(&z, Z_NO_FLUSH);
      out.used(kStep, kStep - z.avail_out);
      if (out.size() > limit) {
        fail(path, "inflates to more than " +
                       (limit >= (std::size_t(1) << 20) ? std::to_string(limit >> 20) + " MiB"
                                                        : std::to_string(limit) + " bytes") +
                       " (at byte offset " + std::to_string(offset()) +
                       " of the compressed file); decompress it with gunzip and read the plain file");
      }
      if (rc == Z_STREAM_END) {
        if (z.avail_in == 0 && fed < in.size()) feed();
        const std::size_t at = offset();
        if (at == in.size()) break;
        if (in.size() - at < 2 || in[at] != 0x1f || in[at + 1] != 0x8b) {
          fail(path, "unexpected bytes after the end of the gzip stream at byte offset " + std::to_string(at));
        }
        inflateReset(&z);  // another member follows
      } else if (rc == Z_OK || rc == Z_BUF_ERROR) {
        if (z.avail_in == 0) {
          if (fed == in.size()) {
            if (rc == Z_OK && z.avail_out == 0) continue;  // output was full: call again
            fail(path, "the gzip stream is truncated: it ends at byte offset " + std::to_string(in.size()) +
                           " before its end marker (" + std::to_string(out.size()) + " bytes inflated)");
          }
          feed();
        }
      } else {
        std::string msg = "the gzip stream is corrupt near byte offset ";
        msg += std::to_string(offset());
        msg += " (zlib: ";
        msg += z.msg ? z.msg : "error";
        msg += ")";
        fail(path, msg);
      }
    }
  } catch (const std::bad_alloc&) {
    inflateEnd(&z);
    out_of_memory(path, out.size());
  } catch (...) {
    inflateEnd(&z);
    throw;
  }
  inflateEnd(&z);
  try {
    return out.join();
  } catch (const std::bad_alloc&) {
    out_of_memory(path, out.size());
  }
}

#else
std::vector<unsigned char> inflate_gzip(const std::vector<unsigned char>&, const std::string& path, std::size_t) {
  fail(path,
       "the file is gzip-compressed, but this tandem was built without zlib (TANDEM_ENABLE_ZLIB=OFF); "
       "decompress it with gunzip first");
}
#endif

std::uint32_t be32(const unsigned char* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | std::uint32_t(p[3]);
}

}  // namespace

// ---- Dataset ----

void Dataset::check(const char* who) const {
  std::size_t values = 0;
  if (!detail::mul_fits(rows, cols, values) || values != features.size()) {
    throw ShapeMismatch(std::string(who) + ": the data set " + (source.empty() ? "given" : source) + " says " +
                        std::to_string(rows) + " rows of " + std::to_string(cols) + " features but holds " +
                        std::to_string(features.size()) + " values; set rows, cols and features together");
  }
  if (!targets.empty() && targets.size() != rows) {
    throw ShapeMismatch(std::string(who) + ": the data set " + (source.empty() ? "given" : source) + " has " +
                        std::to_string(targets.size()) + " targets for " + std::to_string(rows) +
                        " rows; give one per row, or none");
  }
}

std::vector<std::int32_t> Dataset::class_labels() const {
  std::vector<std::int32_t> labels(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const double t = targets[i];
    if (!(t >= 0 && t < 2147483648.0) || t != std::floor(t)) {
      fail(source, "sample " + std::to_string(i) + " has the target " + std::to_string(t) +
                       ", which is not a class index (an integer >= 0); is the label column right?");
    }
    labels[i] = static_cast<std::int32_t>(t);
  }
  return labels;
}

std::int32_t Dataset::class_count() const {
  std::int64_t count = 0;
  for (std::int32_t label : class_labels()) count = std::max<std::int64_t>(count, std::int64_t(label) + 1);
  if (count > std::numeric_limits<std::int32_t>::max()) {
    fail(source, "a class index of 2^31 - 1 leaves no room to count the classes; is the label column right?");
  }
  return static_cast<std::int32_t>(count);
}

Dataset Dataset::select(std::span<const std::size_t> indices) const {
  check("Dataset::select");
  Dataset d;
  d.rows = indices.size();
  d.cols = cols;
  d.source = source;
  d.features.resize(d.rows * cols);
  if (!targets.empty()) d.targets.resize(d.rows);
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const std::size_t r = indices[i];
    if (r >= rows) throw InvalidArgument("Dataset::select: index " + std::to_string(r) + " is past the last sample");
    std::copy_n(features.data() + r * cols, cols, d.features.data() + i * cols);
    if (!targets.empty()) d.targets[i] = targets[r];
  }
  return d;
}

// ---- files ----

std::vector<unsigned char> read_file(const std::string& path, std::size_t limit) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw IoError(path + ": is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(path + ": cannot open the file (" + std::strerror(errno) + ")");
  const auto too_large = [&] {
    return DataError(path + ": more than " + std::to_string(limit >> 20) +
                     " MiB; tandem reads data sets into memory, up to that size (a device such as /dev/zero never "
                     "ends)");
  };
  std::vector<unsigned char> whole;
  Chunks more;
  try {
    // A regular file says its size: refused before anything is read, else read into one vector
    // of that size. Anything else (a pipe, a device), and what a file gains while it is read, is
    // read in chunks, never more than one byte past the limit.
    const auto size = std::filesystem::is_regular_file(path, ec) ? std::filesystem::file_size(path, ec) : 0;
    if (!ec && size > limit) throw too_large();
    if (size > 0) {
      whole.resize(static_cast<std::size_t>(size));
      in.read(reinterpret_cast<char*>(whole.data()), static_cast<std::streamsize>(whole.size()));
      whole.resize(static_cast<std::size_t>(in.gcount()));
    }
    const std::size_t cap = limit == SIZE_MAX ? SIZE_MAX : limit + 1;
    while (in) {
      const std::size_t want = std::min(Chunks::kChunk, cap - whole.size() - more.size());
      in.read(reinterpret_cast<char*>(more.room(want)), static_cast<std::streamsize>(want));
      more.used(want, static_cast<std::size_t>(in.gcount()));
      if (whole.size() + more.size() > limit) throw too_large();
    }
    if (in.bad()) throw IoError(path + ": read error (" + std::strerror(errno) + ")");
    more.append_to(whole);
  } catch (const std::bad_alloc&) {
    out_of_memory(path, whole.size() + more.size());
  }
  return decompress(std::move(whole), path, limit);
}

std::vector<unsigned char> decompress(std::vector<unsigned char> bytes, const std::string& source, std::size_t limit) {
  if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) return inflate_gzip(bytes, source, limit);
  return bytes;
}

// ---- IDX ----

IdxArray parse_idx(std::span<const unsigned char> bytes, const std::string& source) {
  if (bytes.size() < 4) fail(source, "byte offset 0: too short for an IDX header (4 bytes)");
  if (bytes[0] != 0 || bytes[1] != 0) {
    fail(source, "byte offset 0: not an IDX file (the magic number must start with two zero bytes)");
  }
  const unsigned type = bytes[2];
  std::size_t elem = 0;
  switch (type) {
    case 0x08:
    case 0x09:
      elem = 1;
      break;
    case 0x0B:
      elem = 2;
      break;
    case 0x0C:
    case 0x0D:
      elem = 4;
      break;
    case 0x0E:
      elem = 8;
      break;
    default: {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", type);
      fail(source,
           std::string("byte offset 2: unknown IDX element type ") + hex + " (expected 0x08, 0x09, 0x0B..0x0E)");
    }
  }
  const unsigned rank = bytes[3];
  if (rank == 0) fail(source, "byte offset 3: an IDX array of rank 0");
  const std::size_t header = 4 + 4 * std::size_t(rank);
  if (bytes.size() < header) {
    fail(source, "truncated header: " + std::to_string(rank) + " dimensions need " + std::to_string(header) +
                     " bytes, the file has " + std::to_string(bytes.size()));
  }
  IdxArray a;
  std::size_t count = 1;
  for (unsigned i = 0; i < rank; ++i) {
    a.dims.push_back(be32(bytes.data() + 4 + 4 * i));
    if (!detail::mul_fits(count, std::size_t(a.dims.back()), count) || count > (std::size_t(1) << 40)) {
      fail(source, "byte offset " + std::to_string(4 + 4 * i) + ": the dimensions describe more than 2^40 values");
    }
  }
  // Each value becomes a double: 8 times the bytes of a u8 file. The cap matches CSV's max_values.
  constexpr std::size_t kMaxValues = std::size_t(1) << 29;
  if (count > kMaxValues) {
    fail(source, "the header describes " + std::to_string(count) + " values, more than the " +
                     std::to_string(kMaxValues) + " (4 GiB as doubles) tandem reads from one IDX file");
  }
  const std::size_t expected = header + count * elem;
  if (bytes.size() != expected) {
    fail(source, std::string(bytes.size() < expected ? "truncated" : "too long") + ": the header describes " +
                     std::to_string(count) + " values (" + std::to_string(expected) + " bytes in all), the file has " +
                     std::to_string(bytes.size()) + " bytes");
  }
  a.values.resize(count);
  const unsigned char* p = bytes.data() + header;
  for (std::size_t i = 0; i < count; ++i, p += elem) {
    switch (type) {
      case 0x08:
        a.values[i] = p[0];
        break;
      case 0x09:
        a.values[i] = static_cast<signed char>(p[0]);
        break;
      case 0x0B:
        a.values[i] = static_cast<std::int16_t>((p[0] << 8) | p[1]);
        break;
      case 0x0C:
        a.values[i] = static_cast<std::int32_t>(be32(p));
        break;
      case 0x0D: {
        const std::uint32_t u = be32(p);
        float f;
        std::memcpy(&f, &u, 4);
        a.values[i] = f;
        break;
      }
      default: {
        const std::uint64_t u = (std::uint64_t(be32(p)) << 32) | be32(p + 4);
        double v;
        std::memcpy(&v, &u, 8);
        a.values[i] = v;
      }
    }
  }
  return a;
}

Dataset read_idx(const std::string& images_path, const std::string& labels_path) try {
  const std::vector<unsigned char> image_bytes = read_file(images_path);
  const IdxArray images = parse_idx(image_bytes, images_path);
  const std::vector<unsigned char> label_bytes = read_file(labels_path);
  const IdxArray labels = parse_idx(label_bytes, labels_path);
  if (labels.dims.size() != 1) {
    fail(labels_path, "a labels file has one dimension; this one has " + std::to_string(labels.dims.size()));
  }
  if (labels.dims[0] != images.dims[0]) {
    fail(labels_path, std::to_string(labels.dims[0]) + " labels for " + std::to_string(images.dims[0]) + " images in " +
                          images_path);
  }
  Dataset d;
  d.source = images_path;
  d.rows = images.dims[0];
  d.cols = d.rows == 0 ? 0 : images.values.size() / d.rows;
  if (d.rows == 0) fail(images_path, "the file holds no images");
  d.features = images.values;
  d.targets = labels.values;
  // A float IDX file may hold NaN or Inf: refused with where, as the CSV reader refuses them
  // (training on one gave a NaN loss and a zero exit).
  const auto bad = std::find_if(d.features.begin(), d.features.end(), [](double v) { return !std::isfinite(v); });
  if (bad != d.features.end()) {
    const auto at = static_cast<std::size_t>(bad - d.features.begin());
    fail(images_path, "image " + std::to_string(at / d.cols) + ", value " + std::to_string(at % d.cols) + " is " +
                          std::to_string(*bad) + ", not a finite number");
  }
  Dataset label_check;  // labels must be class indices; the error names the labels file
  label_check.source = labels_path;
  label_check.targets = d.targets;
  (void)label_check.class_labels();
  return d;
} catch (const std::bad_alloc&) {
  loaders::out_of_memory(images_path, 0);
}

// ---- split, standardisation ----

Split train_test_split(const Dataset& d, double test_fraction, std::uint64_t seed) {
  d.check("train_test_split");
  if (!(test_fraction >= 0 && test_fraction < 1)) {
    throw InvalidArgument("train_test_split: the test fraction must be in [0, 1), not " +
                          std::to_string(test_fraction));
  }
  Rng rng(seed);
  const std::vector<std::size_t> order = rng.permutation(d.rows);
  const auto n_test = static_cast<std::size_t>(std::llround(test_fraction * double(d.rows)));
  if (n_test == d.rows) throw InvalidArgument("train_test_split: no samples would be left to train on");
  Split s;
  s.test = d.select(std::span(order).first(n_test));
  s.train = d.select(std::span(order).subspan(n_test));
  return s;
}

Standardizer Standardizer::fit(const Dataset& d) {
  d.check("Standardizer::fit");
  if (d.rows == 0) throw InvalidArgument("Standardizer::fit: the data set is empty");
  Standardizer s;
  s.mean.assign(d.cols, 0);
  s.scale.assign(d.cols, 0);
  auto at = [&](std::size_t r, std::size_t c) { return d.features[r * d.cols + c]; };
  std::vector<double> largest(d.cols, 0.0);
  for (std::size_t r = 0; r < d.rows; ++r) {
    for (std::size_t c = 0; c < d.cols; ++c) largest[c] = std::max(largest[c], std::fabs(at(r, c)));
  }
  for (std::size_t c = 0; c < d.cols; ++c) {
    if (!std::isfinite(largest[c])) {
      throw DataError(d.source + ": column " + std::to_string(c + 1) +
                      " holds a NaN or infinite value; it cannot be standardised");
    }
  }
  // Sums of values near the largest double overflow: each column is summed divided by a power of
  // two near its largest magnitude, which is exact, so ordinary data get the same bits as without.
  std::vector<double> unit(d.cols, 1.0);
  for (std::size_t c = 0; c < d.cols; ++c) {
    if (largest[c] > 0) unit[c] = std::ldexp(1.0, std::ilogb(largest[c]));
  }
  for (std::size_t r = 0; r < d.rows; ++r) {
    for (std::size_t c = 0; c < d.cols; ++c) s.mean[c] += at(r, c) / unit[c];
  }
  for (std::size_t c = 0; c < d.cols; ++c) s.mean[c] /= double(d.rows);
  for (std::size_t r = 0; r < d.rows; ++r) {
    for (std::size_t c = 0; c < d.cols; ++c) {
      const double dev = at(r, c) / unit[c] - s.mean[c];
      s.scale[c] += dev * dev;
    }
  }
  // A constant feature (to rounding: its spread within a few ulps of its size) keeps scale 1, so it
  // becomes ~0 instead of amplified rounding; so does one whose spread is subnormal (dividing by
  // it would overflow; model files refuse such a scale).
  for (std::size_t c = 0; c < d.cols; ++c) {
    s.mean[c] *= unit[c];
    double& v = s.scale[c];
    v = std::sqrt(v / double(d.rows)) * unit[c];
    if (!(v > 16 * 0x1p-53 * largest[c]) || !(v >= std::numeric_limits<double>::min()) || !std::isfinite(v)) v = 1;
  }
  return s;
}

void Standardizer::apply(Dataset& d) const {
  d.check("Standardizer::apply");
  if (scale.size() != mean.size()) {
    throw ShapeMismatch("Standardizer::apply: " + std::to_string(mean.size()) + " means but " +
                        std::to_string(scale.size()) + " scales; fit the standardiser or load it whole");
  }
  if (d.cols != mean.size()) {
    throw ShapeMismatch("Standardizer::apply: fitted on " + std::to_string(mean.size()) + " features, the data has " +
                        std::to_string(d.cols));
  }
  for (std::size_t r = 0; r < d.rows; ++r) {
    for (std::size_t c = 0; c < d.cols; ++c) {
      double& x = d.features[r * d.cols + c];
      const double y = (x - mean[c]) / scale[c];
      // x - mean overflows when the two are near the largest double with opposite signs.
      x = std::isfinite(y) ? y : x / scale[c] - mean[c] / scale[c];
    }
  }
}

// ---- Rng ----

std::uint64_t Rng::next() {
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t Rng::below(std::uint64_t n) {
  if (n == 0) throw InvalidArgument("Rng::below(0): there is no whole number below 0 to draw");
  // Rejection: drop the top partial range so every value is equally likely.
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % n;
  std::uint64_t v;
  do v = next();
  while (v >= limit);
  return v % n;
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u1;
  do u1 = uniform();
  while (u1 <= 0);
  const double u2 = uniform();
  const double r = std::sqrt(-2 * std::log(u1));
  spare_ = r * std::sin(2 * std::numbers::pi * u2);
  has_spare_ = true;
  return r * std::cos(2 * std::numbers::pi * u2);
}

std::vector<std::size_t> Rng::permutation(std::size_t n) {
  std::vector<std::size_t> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = i;
  for (std::size_t i = n; i > 1; --i) std::swap(p[i - 1], p[below(i)]);
  return p;
}

}  // namespace tandem::data
