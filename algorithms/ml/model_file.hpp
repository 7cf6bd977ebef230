// The pieces of tandem's binary model files (MLP and linear models): little-endian writing and
// bounds-checked reading, and the CRC-32 that guards each file.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tandem/errors.hpp"

namespace tandem::ml::model_file {

inline std::uint32_t crc32(const unsigned char* p, std::size_t n) {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t c = 0xffffffffu;
  for (std::size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xffu] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

class Writer {
 public:
  void bytes(const void* p, std::size_t n) {
    if (n == 0) return;
    const std::size_t at = out.size();
    out.resize(at + n);  // not insert(): GCC 12 warns falsely (-Wstringop-overflow) on it at -O2
    std::memcpy(out.data() + at, p, n);
  }
  template <class U>
  void le(U v) {
    for (std::size_t i = 0; i < sizeof(U); ++i) out.push_back(static_cast<unsigned char>(v >> (8 * i)));
  }
  void f64(double v) {
    std::uint64_t u;
    std::memcpy(&u, &v, 8);
    le(u);
  }
  std::vector<unsigned char> out;
};

class Reader {
 public:
  Reader(const std::vector<unsigned char>& b, std::size_t end, const std::string& source)
      : b_(b), end_(end), source_(source) {}
  std::size_t offset() const { return pos_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw DataError(source_ + ": byte offset " + std::to_string(pos_) + ": " + what);
  }
  void need(std::size_t n, const char* what) {
    if (n > end_ - pos_) {
      fail(std::string("the file ends inside ") + what + " (" + std::to_string(n) + " bytes needed, " +
           std::to_string(end_ - pos_) + " left)");
    }
  }
  template <class U>
  U le(const char* what) {
    need(sizeof(U), what);
    U v = 0;
    for (std::size_t i = 0; i < sizeof(U); ++i) v |= U(b_[pos_ + i]) << (8 * i);
    pos_ += sizeof(U);
    return v;
  }
  double f64(const char* what) {
    const auto u = le<std::uint64_t>(what);
    double v;
    std::memcpy(&v, &u, 8);
    return v;
  }
  const unsigned char* take(std::size_t n, const char* what) {
    need(n, what);
    const unsigned char* p = b_.data() + pos_;
    pos_ += n;
    return p;
  }
  bool at_end() const { return pos_ == end_; }

 private:
  const std::vector<unsigned char>& b_;
  std::size_t pos_ = 0, end_;
  const std::string& source_;
};

// The checks every model file starts with, in this order: the magic, a minimum size, the format
// version (named, so that a newer file says so), and the CRC-32 in its last 4 bytes. Returns a
// Reader past the version, over the bytes before the checksum.
inline Reader open(const std::vector<unsigned char>& bytes, const std::string& source, const char (&magic)[8],
                   std::uint32_t version, std::size_t smallest, const char* kind) {
  if (bytes.size() < 8 || std::memcmp(bytes.data(), magic, 8) != 0) {
    throw DataError(source + ": byte offset 0: not a tandem " + kind + " (it does not start with \"" +
                    std::string(magic, 8) + "\")");
  }
  if (bytes.size() < smallest) {
    throw DataError(source + ": the file is truncated: " + std::to_string(bytes.size()) +
                    " bytes, less than the smallest " + kind);
  }
  Reader r(bytes, bytes.size() - 4, source);
  (void)r.take(8, "the magic number");
  const auto found = r.le<std::uint32_t>("the version");
  if (found != version) {
    r.fail("format version " + std::to_string(found) + "; this tandem reads version " + std::to_string(version) +
           (found > version ? " (the file was written by a newer tandem)" : ""));
  }
  std::uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) stored |= std::uint32_t(bytes[bytes.size() - 4 + std::size_t(i)]) << (8 * i);
  if (stored != crc32(bytes.data(), bytes.size() - 4)) {
    throw DataError(source + ": checksum mismatch: the file is corrupt or truncated (" + std::to_string(bytes.size()) +
                    " bytes)");
  }
  return r;
}

}  // namespace tandem::ml::model_file
