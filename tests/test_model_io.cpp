// Model files: a wrong version, every truncation, random corruption, and corruption behind a
// valid checksum all end in DataError (never a crash or a huge allocation); a file round-trips.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "support.hpp"
#include "tandem/mlp.hpp"
#include "tandem/regression.hpp"
#include "tandem/tandem.hpp"

namespace {

using namespace tandem;

// CRC-32 (IEEE), written here independently of the library's, to forge valid checksums.
std::uint32_t crc(const std::vector<unsigned char>& b, std::size_t n) {
  std::uint32_t c = 0xffffffffu;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= b[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

void reseal(std::vector<unsigned char>& b) {
  const std::uint32_t c = crc(b, b.size() - 4);
  for (int i = 0; i < 4; ++i) b[b.size() - 4 + std::size_t(i)] = static_cast<unsigned char>(c >> (8 * i));
}

std::string error_of(Backend& be, const std::vector<unsigned char>& bytes) {
  try {
    (void)ml::Mlp::deserialize(be, bytes, "model.bin");
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_SUITE("model files") {
  TEST_CASE("a saved model loads back from the file, and missing or foreign files are DataErrors") {
    Backend& be = get_backend("reference");
    ml::Mlp model(be, ml::layers_from_widths({4, 8, 3}));
    const auto path =
        (std::filesystem::temp_directory_path() / ("tandem-model-" + std::to_string(test::seed()))).string();
    model.save(path);
    const ml::Mlp back = ml::Mlp::load(be, path);
    CHECK(back.serialize() == model.serialize());
    std::filesystem::remove(path);
    CHECK_THROWS_WITH_AS(ml::Mlp::load(be, path), doctest::Contains("cannot open"), DataError);
    const std::vector<unsigned char> text = {'1', ',', '2', '\n'};
    CHECK(error_of(be, text).find("not a tandem model file") != std::string::npos);
  }

  TEST_CASE("a wrong version is named, and corruption and truncation fail the checksum") {
    Backend& be = get_backend("reference");
    const std::vector<unsigned char> good = ml::Mlp(be, ml::layers_from_widths({3, 5, 2})).serialize();
    std::vector<unsigned char> v2 = good;
    v2[8] = 2;
    reseal(v2);
    CHECK(error_of(be, v2).find("format version 2; this tandem reads version 1") != std::string::npos);
    std::vector<unsigned char> flipped = good;
    flipped[40] ^= 1;
    CHECK(error_of(be, flipped).find("checksum mismatch") != std::string::npos);
    // Every truncation.
    for (std::size_t n = 0; n < good.size(); ++n) {
      CAPTURE(n);
      CHECK(!error_of(be, std::vector<unsigned char>(good.begin(), good.begin() + static_cast<long>(n))).empty());
    }
  }

  TEST_CASE("thousands of random corruptions, also behind a valid checksum: a model or a DataError") {
    Backend& be = get_backend("reference");
    ml::Mlp model(be, {{ml::LayerKind::linear, 3, 4},
                       {ml::LayerKind::activation(UnaryOp::tanh), 4, 4},
                       {ml::LayerKind::linear, 4, 2}});
    model.standardizer.mean = {0, 1, 2};
    model.standardizer.scale = {1, 1, 1};
    const std::vector<unsigned char> good = model.serialize();
    data::Rng rng(test::seed());
    int rejected = 0, loaded = 0;
    for (int trial = 0; trial < 3000; ++trial) {
      std::vector<unsigned char> b = good;
      const auto edits = 1 + rng.below(3);
      for (std::uint64_t e = 0; e < edits; ++e) {
        // Mostly the header and layer table, where a bad value could mislead the reader.
        const std::size_t at =
            rng.below(4) == 0 ? rng.below(b.size() - 4) : rng.below(std::min<std::size_t>(120, b.size() - 4));
        b[at] = static_cast<unsigned char>(rng.next());
      }
      if (trial % 2 == 0) reseal(b);
      try {
        const ml::Mlp m = ml::Mlp::deserialize(be, b, "fuzz.bin");
        CHECK(m.parameter_count() > 0);
        ++loaded;
      } catch (const DataError&) {
        ++rejected;
      }
    }
    CHECK(rejected > 1500);
    MESSAGE(rejected, " rejected, ", loaded, " loaded (edits that changed only parameter values)");
  }

  TEST_CASE("every model save writes loads back: 5000 layers, and the standardiser is validated") {
    Backend& be = get_backend("reference");
    const std::vector<std::size_t> widths(2501, 2);  // 2500 linear layers and 2499 activations
    ml::Mlp deep(be, ml::layers_from_widths(widths));
    CHECK(deep.layers().size() > 4096);  // once the loader's cap
    CHECK(ml::Mlp::deserialize(be, deep.serialize(), "deep").serialize() == deep.serialize());
    ml::Mlp model(be, ml::layers_from_widths({4, 8, 3}));
    model.standardizer.mean = {0, 1, 2, 3};
    model.standardizer.scale = {1, 1, 0, 1};  // a zero scale divides by zero
    CHECK(error_of(be, model.serialize()).find("scale is not a finite positive number") != std::string::npos);
    model.standardizer.scale = {1, 5e-324, 1, 1};  // subnormal: 1 / scale overflows
    CHECK(error_of(be, model.serialize()).find("scale is not a finite positive number of at least 2^-1022") !=
          std::string::npos);
    model.standardizer.scale = {1, 1, 1, 1};
    model.standardizer.mean[1] = std::nan("");
    CHECK(error_of(be, model.serialize()).find("mean is not finite") != std::string::npos);
  }

  TEST_CASE("a NaN or infinite weight behind a valid checksum is refused, naming where it is") {
    Backend& be = get_backend("reference");
    for (DType t : {DType::f32, DType::f64}) {
      CAPTURE(name_of(t));
      ml::MlpOptions o;
      o.dtype = t;
      ml::Mlp model(be, ml::layers_from_widths({3, 4, 2}), o);
      std::vector<unsigned char> good = model.serialize();
      CHECK(error_of(be, good).empty());
      for (const double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
        std::vector<unsigned char> b = good;
        // The last parameter: the 4 checksum bytes end the file, the value sits just before them.
        const std::size_t at = b.size() - 4 - size_of(t);
        if (t == DType::f32) {
          const float f = static_cast<float>(bad);
          std::memcpy(b.data() + at, &f, 4);
        } else {
          std::memcpy(b.data() + at, &bad, 8);
        }
        reseal(b);
        const std::string e = error_of(be, b);
        CHECK(e.find(std::isnan(bad) ? "is NaN" : "is infinite") != std::string::npos);
        CHECK(e.find("byte offset " + std::to_string(at)) != std::string::npos);
      }
    }
  }

  TEST_CASE("fit() never makes a scale the model file would refuse") {
    data::Dataset d;
    d.rows = 4;
    d.cols = 2;
    d.features = {1e-310, 1, 3e-310, 2, -2e-310, 3, 0, 4};  // column 0 spreads subnormally
    d.targets = {0, 1, 0, 1};
    const data::Standardizer s = data::Standardizer::fit(d);
    for (double v : s.scale) CHECK(v >= std::numeric_limits<double>::min());
  }

  TEST_CASE("linear model files round-trip exactly and refuse corruption") {
    ml::LinearModel m;
    m.coefficients = {0.1, -2.5e-300, 3e300};
    m.intercept = -7.25;
    const std::vector<unsigned char> bytes = ml::serialize(m);
    const ml::LinearModel back = ml::deserialize_linear_model(bytes, "lr");
    CHECK(back.coefficients == m.coefficients);
    CHECK(back.intercept == m.intercept);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      std::vector<unsigned char> bad = bytes;
      bad[i] ^= 0x40;
      CHECK_THROWS_AS(ml::deserialize_linear_model(bad, "lr"), DataError);
    }
    CHECK_THROWS_AS(ml::deserialize_linear_model({bytes.begin(), bytes.end() - 1}, "lr"), DataError);
    CHECK_THROWS_WITH_AS(ml::load_linear_model("/nonexistent/lr.model"), doctest::Contains("cannot open"), IoError);
  }
}
