#include "harness.hpp"

#include <cstring>
#include <limits>

#include "tandem/errors.hpp"

namespace tandem::verify::detail {

namespace {
constexpr unsigned char kGuardByte = 0xA5;

// Host bytes of `values` in dtype t.
std::vector<unsigned char> encode(DType t, const Host& values) {
  std::vector<unsigned char> bytes(values.size() * size_of(t));
  for (std::size_t i = 0; i < values.size(); ++i) {
    unsigned char* dst = bytes.data() + i * size_of(t);
    const double v = values[i];
    switch (t) {
      case DType::f16: { const half h{float(v)}; std::memcpy(dst, &h.bits, 2); break; }
      case DType::bf16: { const bfloat16 h{float(v)}; std::memcpy(dst, &h.bits, 2); break; }
      case DType::f32: { const float f = float(v); std::memcpy(dst, &f, 4); break; }
      case DType::f64: std::memcpy(dst, &v, 8); break;
      case DType::i32: { const std::int32_t x = static_cast<std::int32_t>(v); std::memcpy(dst, &x, 4); break; }
    }
  }
  return bytes;
}

Host decode(DType t, const std::vector<unsigned char>& bytes) {
  Host values(bytes.size() / size_of(t));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const unsigned char* src = bytes.data() + i * size_of(t);
    switch (t) {
      case DType::f16: { std::uint16_t b; std::memcpy(&b, src, 2); values[i] = half::to_float(b); break; }
      case DType::bf16: { std::uint16_t b; std::memcpy(&b, src, 2); values[i] = bfloat16::to_float(b); break; }
      case DType::f32: { float f; std::memcpy(&f, src, 4); values[i] = f; break; }
      case DType::f64: std::memcpy(&values[i], src, 8); break;
      case DType::i32: { std::int32_t x; std::memcpy(&x, src, 4); values[i] = x; break; }
    }
  }
  return values;
}
}  // namespace

Host random_values(std::mt19937_64& rng, DType t, std::size_t n, double lo, double hi) {
  Host values(n);
  if (t == DType::i32) {
    std::uniform_int_distribution<int> dist(static_cast<int>(lo), static_cast<int>(hi));
    for (auto& v : values) v = dist(rng);
  } else {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (auto& v : values) v = round_to(t, dist(rng));
  }
  return values;
}

void plant_non_finite(std::mt19937_64& rng, Host& values) {
  if (values.size() < 3) return;
  std::uniform_int_distribution<std::size_t> pick(0, values.size() - 1);
  values[pick(rng)] = std::numeric_limits<double>::quiet_NaN();
  values[pick(rng)] = std::numeric_limits<double>::infinity();
  values[pick(rng)] = -std::numeric_limits<double>::infinity();
}

Buffer upload(Backend& be, DType t, const Host& values) {
  Buffer b(be, t, values.size());
  const auto bytes = encode(t, values);
  b.upload_bytes(bytes.data(), bytes.size());
  return b;
}

Host download(const Buffer& b) {
  std::vector<unsigned char> bytes(b.bytes());
  b.download_bytes(bytes.data(), bytes.size());
  return decode(b.dtype(), bytes);
}

Output make_output(Backend& be, DType t, std::size_t n, const Host* initial) {
  Output out;
  out.whole = Buffer(be, t, n + 2 * kGuard);
  Host fill_values = initial ? *initial
                             : Host(n, t == DType::i32 ? double(std::numeric_limits<std::int32_t>::min())
                                                       : std::numeric_limits<double>::quiet_NaN());
  std::vector<unsigned char> bytes(out.whole.bytes(), kGuardByte);
  const auto inner = encode(t, fill_values);
  if (!inner.empty()) std::memcpy(bytes.data() + kGuard * size_of(t), inner.data(), inner.size());
  out.whole.upload_bytes(bytes.data(), bytes.size());
  out.inner = out.whole.slice(kGuard, n);
  return out;
}

std::string check_guards(const Output& out) {
  std::vector<unsigned char> bytes(out.whole.bytes());
  out.whole.download_bytes(bytes.data(), bytes.size());
  const std::size_t guard_bytes = kGuard * size_of(out.whole.dtype());
  for (std::size_t i = 0; i < guard_bytes; ++i) {
    if (bytes[i] != kGuardByte) {
      return "guard zone before the output overwritten at byte " + std::to_string(i) + " of " +
             std::to_string(guard_bytes);
    }
    if (bytes[bytes.size() - guard_bytes + i] != kGuardByte) {
      return "guard zone after the output overwritten at byte " + std::to_string(i) + " past its end";
    }
  }
  return "";
}

CaseResult result_for(const CheckCase& c, const Backend& be) {
  CaseResult r;
  r.algorithm = c.algorithm;
  r.backend = be.name();
  r.tier = c.tier;
  r.dtype = c.dtype;
  r.size = c.size;
  return r;
}

void finish(CaseResult& r, const Output& out, const Host& expected, const Host& bound) {
  r.comparison = compare(download(out.inner), expected, bound);
  r.guard_failure = check_guards(out);
}

std::mt19937_64 case_rng(std::uint64_t seed, const CheckCase& c) {
  // Each case gets its own stream, so one case replays alone with the same seed.
  const std::string key = c.family + "/" + c.algorithm + "/" + c.tier + "/" + c.dtype + "/" + c.size;
  return std::mt19937_64(seed ^ std::hash<std::string>{}(key));
}

std::vector<std::size_t> vector_sizes(bool quick) {
  if (quick) return {0, 1, 33, 1001, 70001};
  return {0, 1, 2, 31, 32, 33, 1000, 1001, 70001};
}

}  // namespace tandem::verify::detail

namespace tandem::verify {

CaseResult run_case(const CheckCase& c, Backend& tested, Backend& reference, std::uint64_t seed) {
  try {
    return c.run(tested, reference, seed);
  } catch (const std::exception& e) {
    CaseResult r = detail::result_for(c, tested);
    r.error = e.what();
    return r;
  }
}

}  // namespace tandem::verify
