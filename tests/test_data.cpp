// Data loading: the shipped data sets, CSV and IDX parsing, gzip, bad input (named file, line or
// offset), random and truncated inputs, the seeded split, standardisation and the generator.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "ml_support.hpp"
#include "tandem/data.hpp"
#include "tandem/errors.hpp"
#include "tandem/mlp.hpp"
#include "tandem/regression.hpp"
#include "tandem/registry.hpp"

namespace {

using namespace tandem;
namespace fs = std::filesystem;

using test::data_file;
// The compressed file itself (the gzip tests read its bytes).
std::string gz_file(const char* name) { return std::string(TANDEM_DATA_DIR) + "/" + name; }

// A scratch file, removed at the end of the test.
struct TempFile {
  fs::path path;
  explicit TempFile(const std::string& name)
      : path(fs::temp_directory_path() / ("tandem-test-" + std::to_string(::getpid()) + "-" + name)) {}
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
  void write(const void* bytes, std::size_t n) const {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n));
  }
  void write(const std::vector<unsigned char>& b) const { write(b.data(), b.size()); }
  void write(const std::string& s) const { write(s.data(), s.size()); }
  std::string str() const { return path.string(); }
};

std::vector<unsigned char> raw_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// f must throw DataError with a message containing every part.
template <class F>
void expect_data_error(F&& f, std::initializer_list<std::string> parts) {
  std::string message;
  try {
    f();
  } catch (const DataError& e) {
    message = e.what();
  }
  REQUIRE_MESSAGE(!message.empty(), "no DataError was raised");
  for (const std::string& part : parts) {
    CHECK_MESSAGE(message.find(part) != std::string::npos, "the message\n  ", message, "\nlacks\n  ", part);
  }
}

void put_be32(std::vector<unsigned char>& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>(v >> s));
}

// An IDX file of u8 values with the given dimensions.
std::vector<unsigned char> idx_u8(std::vector<std::uint32_t> dims, const std::vector<unsigned char>& values) {
  std::vector<unsigned char> b = {0, 0, 0x08, static_cast<unsigned char>(dims.size())};
  for (std::uint32_t d : dims) put_be32(b, d);
  b.insert(b.end(), values.begin(), values.end());
  return b;
}

}  // namespace

TEST_SUITE("data") {
  TEST_CASE("the shipped digits: 1797 images of 64 pixels, classes 0..9") {
    if (!test::shipped_data_or_skip()) return;
    const data::Dataset d = data::read_csv(data_file("digits.csv.gz"), {.label_column = -1});
    CHECK(d.rows == 1797);
    CHECK(d.cols == 64);
    CHECK(d.class_count() == 10);
    const auto labels = d.class_labels();
    CHECK(std::set<std::int32_t>(labels.begin(), labels.end()).size() == 10);
    CHECK(d.features[2] == 5);  // first row: 0,0,5,13,...
    CHECK(labels[0] == 0);
    CHECK(*std::max_element(d.features.begin(), d.features.end()) == 16);
  }

  TEST_CASE("the shipped diabetes data: blank-separated features and a separate target file") {
    if (!test::shipped_data_or_skip()) return;
    data::Dataset d = data::read_csv(data_file("diabetes_data_raw.csv.gz"));
    CHECK(d.rows == 442);
    CHECK(d.cols == 10);
    CHECK(d.features[0] == 59);
    CHECK(d.features[9] == 87);
    data::attach_targets(d, data::read_csv(data_file("diabetes_target.csv.gz")));
    CHECK(d.targets[0] == 151);
    CHECK(d.targets[1] == 75);
    expect_data_error([&] { data::attach_targets(d, data::read_csv(data_file("digits.csv.gz"))); },
                      {"digits.csv", "one column"});
  }

  TEST_CASE("CSV: header, delimiters and the label column") {
    const data::Dataset a = data::parse_csv("x,y,label\n1,2,0\n3,4,1\n", "a.csv", {.label_column = -1});
    CHECK(a.rows == 2);
    CHECK(a.cols == 2);
    CHECK(a.features == std::vector<double>{1, 2, 3, 4});
    CHECK(a.targets == std::vector<double>{0, 1});
    const data::Dataset b = data::parse_csv("7;1.5;-2e3\r\n8;+2;.5\r\n\r\n", "b.csv", {.label_column = 0});
    CHECK(b.targets == std::vector<double>{7, 8});
    CHECK(b.features == std::vector<double>{1.5, -2000, 2, 0.5});
    const data::Dataset c = data::parse_csv("1\t2\n3\t4\n", "c.tsv");
    CHECK(c.cols == 2);
    CHECK(c.targets.empty());
    const data::Dataset d = data::parse_csv("  1   2 \n 3 4\n", "d.txt");
    CHECK(d.features == std::vector<double>{1, 2, 3, 4});
    // A UTF-8 byte order mark does not turn the first data row into a header.
    const data::Dataset bom = data::parse_csv(
        "\xEF\xBB\xBF"
        "5,6\n7,8\n",
        "bom.csv");
    CHECK(bom.rows == 2);
    CHECK(bom.features.front() == 5);
    CHECK(data::parse_label_column("last") == -1);
    CHECK(data::parse_label_column("first") == 0);
    CHECK(data::parse_label_column("3") == 3);
    CHECK(!data::parse_label_column("none").has_value());
    CHECK_THROWS_AS(data::parse_label_column("lats"), InvalidArgument);
  }

  TEST_CASE("CSV: quoted fields as RFC 4180 writes them") {
    // A header whose names hold the delimiter, a quote and a line break; quoted numbers; CRLF.
    const data::Dataset a = data::parse_csv(
        "\"a,b\",\"say \"\"hi\"\"\",\"multi\r\nline\",y\r\n"
        "1,\"2.5\", 3 ,0\r\n\"-4\",5,6,1\r\n",
        "q.csv", {.label_column = -1});
    CHECK(a.rows == 2);
    CHECK(a.cols == 3);
    CHECK(a.features == std::vector<double>{1, 2.5, 3, -4, 5, 6});
    CHECK(a.targets == std::vector<double>{0, 1});
    // The delimiter is found outside quotes: ';' here although the first name holds a ','.
    const data::Dataset b = data::parse_csv("\"x,1\";y\n7;8\n", "b.csv");
    CHECK(b.cols == 2);
    CHECK(b.features == std::vector<double>{7, 8});
    // ... and on the first line with content: blank lines before it do not make it blank-separated.
    const data::Dataset blank_first = data::parse_csv("\n  \r\n1,2\n3,4\n", "lead.csv");
    CHECK(blank_first.cols == 2);
    CHECK(blank_first.features == std::vector<double>{1, 2, 3, 4});
    // A quoted line break moves the line count: the bad value is named on line 4.
    expect_data_error([] { data::parse_csv("\"a\nb\",c\n1,2\n3,x\n", "n.csv"); }, {"n.csv", "line 4, column 2"});
    expect_data_error([] { data::parse_csv("a,b\n1,\"2\n", "o.csv"); }, {"o.csv", "line 2", "never closed"});
    expect_data_error([] { data::parse_csv("a,b\n1,\"2\"x\n", "t.csv"); },
                      {"t.csv", "line 2", "after the closing quote"});
  }

  TEST_CASE("CSV: a first row with both numbers and text is neither header nor data, and nothing is dropped") {
    // Each was once taken for a header and the row dropped without a word.
    for (const char* first : {"1,2x,3", "1,1e309,3", "nan,2,3"}) {
      CAPTURE(first);
      expect_data_error([&] { data::parse_csv(std::string(first) + "\n4,5,6\n", "f.csv"); },
                        {"f.csv", "line 1, column", "neither a header", "header option"});
    }
    // Said to be a header, it is one; text in every column is one without being said.
    CHECK(data::parse_csv("id,2019,2020\n4,5,6\n", "y.csv",
                          {.header = data::CsvOptions::Header::yes, .label_column = std::nullopt})
              .rows == 1);
    CHECK(data::parse_csv("a,b,c\n4,5,6\n", "h.csv").rows == 1);
    CHECK(data::parse_csv("1,2,3\n4,5,6\n", "n.csv").rows == 2);
  }

  TEST_CASE("files: a directory is an IoError with its path, an endless device a DataError at the limit") {
    const std::string dir = std::filesystem::temp_directory_path().string();
    CHECK_THROWS_WITH_AS(data::read_file(dir), doctest::Contains((dir + ": is a directory").c_str()), IoError);
    CHECK_THROWS_WITH_AS(data::read_csv(dir), doctest::Contains("is a directory"), IoError);
    CHECK_THROWS_WITH_AS(data::read_file("/dev/zero", std::size_t(16) << 20), doctest::Contains("more than 16 MiB"),
                         DataError);
    CHECK_THROWS_WITH_AS(ml::Mlp::load(get_backend("reference"), dir), doctest::Contains("is a directory"), IoError);
  }

  TEST_CASE("CSV: bad input names the file, line and column") {
    expect_data_error([] { data::parse_csv("1,2\n3,x\n", "f.csv"); },
                      {"f.csv", "line 2, column 2", "'x' is not a (finite) number"});
    expect_data_error([] { data::parse_csv("1,2\n3,4,5\n", "f.csv"); },
                      {"f.csv", "line 2", "3 fields", "line 1 has 2"});
    expect_data_error([] { data::parse_csv("", "e.csv"); }, {"e.csv", "no data"});
    expect_data_error([] { data::parse_csv("a,b\n", "h.csv"); }, {"h.csv", "header but no data"});
    expect_data_error([] { data::parse_csv("1,2\n", "l.csv", {.label_column = 5}); }, {"l.csv", "label column 5"});
    expect_data_error([] { data::parse_csv("1\n2\n", "o.csv", {.label_column = 0}); }, {"no feature columns"});
    expect_data_error([] { data::parse_csv("1,2\n3,\n", "m.csv"); },
                      {"line 2, column 2", "'' is not a (finite) number"});
    for (const char* bad : {"nan", "inf", "-inf", "+-1", "++1", "1e999", "-1e99999", "1e-400x"}) {
      CAPTURE(bad);
      expect_data_error([&] { data::parse_csv(std::string("1,2\n3,") + bad + "\n", "f.csv"); },
                        {"line 2, column 2", "is not a (finite) number"});
    }
    // Below a double's range: a zero of its sign, as NumPy reads it (documented in docs/ml.md).
    const data::Dataset tiny = data::parse_csv("1,2\n1e-400,-1e-99999\n", "t.csv");
    REQUIRE(tiny.features.size() == 4);
    CHECK(tiny.features[2] == 0.0);
    CHECK(!std::signbit(tiny.features[2]));
    CHECK(tiny.features[3] == 0.0);
    CHECK(std::signbit(tiny.features[3]));
    expect_data_error([] { data::parse_csv("1,2147483647\n", "big.csv", {.label_column = -1}).class_count(); },
                      {"big.csv", "2^31 - 1"});
    expect_data_error([] { data::parse_csv("1,0.5\n", "c.csv", {.label_column = -1}).class_labels(); },
                      {"c.csv", "not a class index"});
    expect_data_error([] { data::read_csv("/nonexistent/tandem.csv"); }, {"/nonexistent/tandem.csv", "cannot open"});
    TempFile bin("binary.csv");
    bin.write(std::string("1,2\n\0\0\0", 7));
    expect_data_error([&] { data::read_csv(bin.str()); }, {"byte offset 4", "not a text"});
  }

  TEST_CASE("gzip: corrupt, truncated and trailing bytes are DataErrors with the byte offset") {
    if (!test::zlib_or_skip()) return;
    const std::vector<unsigned char> gz = raw_bytes(gz_file("digits.csv.gz"));
    REQUIRE(gz.size() > 1000);
    TempFile f("digits.csv.gz");
    std::vector<unsigned char> truncated(gz.begin(), gz.begin() + static_cast<long>(gz.size() / 2));
    f.write(truncated);
    expect_data_error([&] { data::read_file(f.str()); },
                      {f.str(), "truncated", "byte offset " + std::to_string(truncated.size())});
    std::vector<unsigned char> corrupt = gz;
    for (std::size_t i = 100; i < 140; ++i) corrupt[i] ^= 0x5a;
    f.write(corrupt);
    CHECK_THROWS_AS(data::read_csv(f.str()), DataError);
    std::vector<unsigned char> trailing = gz;
    trailing.push_back('x');
    f.write(trailing);
    expect_data_error([&] { data::read_file(f.str()); },
                      {"after the end of the gzip stream", std::to_string(gz.size())});
    // Two members, as `cat a.gz b.gz` makes: both inflate.
    std::vector<unsigned char> twice = gz;
    twice.insert(twice.end(), gz.begin(), gz.end());
    f.write(twice);
    CHECK(data::read_csv(f.str(), {.label_column = -1}).rows == 2 * 1797);
    // The limit holds for the inflated size too (a gzip bomb), in memory as from a file.
    const std::size_t plain = data::decompress(gz, "digits").size();
    CHECK(data::decompress(gz, "digits", plain).size() == plain);
    expect_data_error([&] { data::decompress(gz, "digits", plain / 2); },
                      {"digits", "inflates to more than " + std::to_string(plain / 2) + " bytes"});
    expect_data_error([&] { data::read_file(f.str(), 400000); },
                      {"inflates to more than 400000 bytes"});  // two members: 529,424 bytes
    CHECK(data::decompress({1, 2, 3}, "raw") == std::vector<unsigned char>{1, 2, 3});
  }

  TEST_CASE("IDX: images and labels, and bad files named with the byte offset") {
    TempFile images("images.idx"), labels("labels.idx");
    images.write(idx_u8({3, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 255}));
    labels.write(idx_u8({3}, {7, 0, 9}));
    const data::Dataset d = data::read_idx(images.str(), labels.str());
    CHECK(d.rows == 3);
    CHECK(d.cols == 4);
    CHECK(d.features.back() == 255);
    CHECK(d.targets == std::vector<double>{7, 0, 9});

    labels.write(idx_u8({2}, {7, 0}));
    expect_data_error([&] { data::read_idx(images.str(), labels.str()); }, {"2 labels for 3 images"});
    // A label that is not a class index (int32 -1) is blamed on the labels file, not the images.
    labels.write(std::vector<unsigned char>{0, 0, 0x0C, 1, 0, 0, 0, 3, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 9});
    expect_data_error([&] { data::read_idx(images.str(), labels.str()); },
                      {labels.str(), "sample 1 has the target -1"});
    auto bytes = idx_u8({3, 2, 2}, {0, 1, 2});
    expect_data_error([&] { data::parse_idx(bytes, "t.idx"); }, {"t.idx", "truncated", "12 values"});
    bytes = {1, 0, 8, 1};
    expect_data_error([&] { data::parse_idx(bytes, "m.idx"); }, {"byte offset 0", "not an IDX file"});
    bytes = {0, 0, 0x42, 1, 0, 0, 0, 1, 5};
    expect_data_error([&] { data::parse_idx(bytes, "y.idx"); }, {"byte offset 2", "element type"});
    bytes = {0, 0, 8, 3, 0, 0};
    expect_data_error([&] { data::parse_idx(bytes, "h.idx"); }, {"truncated header"});
    bytes = {0, 0, 8, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    expect_data_error([&] { data::parse_idx(bytes, "big.idx"); }, {"2^40"});
    // 2^30 one-byte values would be 8 GiB as doubles: refused from the header, before any allocation.
    bytes = {0, 0, 8, 1, 0x40, 0, 0, 0};
    expect_data_error([&] { data::parse_idx(bytes, "wide.idx"); }, {"wide.idx", "1073741824 values", "4 GiB"});
  }

  TEST_CASE("CSV: caps on fields per line and on values, named with the line, before memory runs out") {
    // A line of 5000 commas (each field about 32 bytes while parsed) against a cap of 1000.
    data::CsvOptions few;
    few.max_columns = 1000;
    expect_data_error([&] { data::parse_csv(std::string(5000, ',') + "\n", "commas.csv", few); },
                      {"commas.csv", "line 1", "more than 1000 fields", "max_columns"});
    few.header = data::CsvOptions::Header::no;
    std::string wide = "0";
    for (int c = 1; c < 1000; ++c) wide += ",0";
    CHECK(data::parse_csv(wide + "\n", "x.csv", few).cols == 1000);
    std::string many;
    for (int r = 0; r < 40; ++r) many += "1,2,3\n";
    data::CsvOptions small;
    small.max_values = 100;  // 33 rows of 3 fit, the 34th does not
    expect_data_error([&] { data::parse_csv(many, "many.csv", small); },
                      {"many.csv", "line 34", "more than 100 values", "max_values"});
    small.max_values = 120;
    CHECK(data::parse_csv(many, "many.csv", small).rows == 40);
  }

  TEST_CASE("thousands of random and truncated inputs: a result or a DataError, never a crash") {
    if (!test::zlib_or_skip()) return;
    data::Rng rng(test::seed());
    const std::string csv = "a,b,c\n1,2,3\n4.5,-6,7e2\n8,9,10\n";
    const std::vector<unsigned char> idx = idx_u8({2, 3}, {1, 2, 3, 4, 5, 6});
    const std::string alphabet = "0123456789,;.\t -+eE\nx\r";
    int errors = 0, parsed = 0;
    for (int trial = 0; trial < 3000; ++trial) {
      std::string text = csv;
      std::vector<unsigned char> bytes = idx;
      if (trial % 3 == 0) {
        text.resize(rng.below(text.size() + 1));
        bytes.resize(rng.below(bytes.size() + 1));
      } else {
        const auto edits = 1 + rng.below(4);
        for (std::uint64_t e = 0; e < edits; ++e) {
          text[rng.below(text.size())] = alphabet[rng.below(alphabet.size())];
          bytes[rng.below(bytes.size())] = static_cast<unsigned char>(rng.next());
        }
      }
      try {
        const data::Dataset d = data::parse_csv(text, "fuzz.csv", {.label_column = -1});
        CHECK(d.features.size() == d.rows * d.cols);
        ++parsed;
      } catch (const DataError&) {
        ++errors;
      }
      try {
        const data::IdxArray a = data::parse_idx(bytes, "fuzz.idx");
        std::size_t count = 1;
        for (auto dim : a.dims) count *= dim;
        CHECK(a.values.size() == count);
        ++parsed;
      } catch (const DataError&) {
        ++errors;
      }
    }
    CHECK(errors > 0);
    CHECK(parsed > 0);
    // Truncated gzip files, through the file reader.
    const std::vector<unsigned char> gz = raw_bytes(gz_file("diabetes_target.csv.gz"));
    TempFile f("fuzz.gz");
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<unsigned char> b(gz.begin(), gz.begin() + static_cast<long>(rng.below(gz.size())));
      if (trial % 2 && !b.empty()) b[rng.below(b.size())] ^= static_cast<unsigned char>(1 + rng.below(255));
      f.write(b);
      try {
        (void)data::read_csv(f.str());
      } catch (const DataError&) {
      }
    }
  }

  TEST_CASE("the split is seeded, disjoint and complete, and standardisation gives mean 0 and variance 1") {
    if (!test::shipped_data_or_skip()) return;
    const data::Dataset d = data::read_csv(data_file("digits.csv.gz"), {.label_column = -1});
    const data::Split s = data::train_test_split(d, 0.2, 42);
    CHECK(s.test.rows == 359);
    CHECK(s.train.rows == 1797 - 359);
    const data::Split again = data::train_test_split(d, 0.2, 42);
    CHECK(again.test.features == s.test.features);
    CHECK(data::train_test_split(d, 0.2, 43).test.features != s.test.features);
    double total = 0;
    for (double t : s.train.targets) total += t;
    for (double t : s.test.targets) total += t;
    CHECK(total == std::accumulate(d.targets.begin(), d.targets.end(), 0.0));
    CHECK_THROWS_AS(data::train_test_split(d, 1.0, 1), InvalidArgument);
    // A feature that is constant but not exactly representable after centring keeps scale 1.
    data::Dataset tenth = data::parse_csv("0.1,1\n0.1,2\n0.1,4\n", "c.csv");
    const data::Standardizer sc = data::Standardizer::fit(tenth);
    CHECK(sc.scale[0] == 1);
    sc.apply(tenth);
    CHECK(std::fabs(tenth.features[0]) < 1e-15);

    data::Dataset train = s.train;
    const data::Standardizer st = data::Standardizer::fit(train);
    st.apply(train);
    for (std::size_t c : {std::size_t(0), std::size_t(20), std::size_t(63)}) {
      double mean = 0, var = 0;
      for (std::size_t r = 0; r < train.rows; ++r) mean += train.features[r * 64 + c];
      mean /= double(train.rows);
      for (std::size_t r = 0; r < train.rows; ++r) var += std::pow(train.features[r * 64 + c] - mean, 2);
      var /= double(train.rows);
      CHECK(std::fabs(mean) < 1e-12);
      // Column 0 is constant (always 0) in digits: it stays 0, not NaN.
      CHECK((c == 0 ? var == 0 : std::fabs(var - 1) < 1e-12));
    }
  }

  TEST_CASE("the generator is the same on every platform") {
    data::Rng rng(0);
    CHECK(rng.next() == 0xe220a8397b1dcdafULL);  // splitmix64's first output from state 0
    const auto p = data::Rng(7).permutation(1000);
    std::vector<std::size_t> sorted = p;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::size_t> iota(1000);
    std::iota(iota.begin(), iota.end(), 0);
    CHECK(sorted == iota);
    CHECK(p != iota);
    double sum = 0, sq = 0;
    data::Rng g(3);
    for (int i = 0; i < 100000; ++i) {
      const double v = g.normal();
      sum += v;
      sq += v * v;
    }
    CHECK(std::fabs(sum / 1e5) < 0.02);
    CHECK(std::fabs(sq / 1e5 - 1) < 0.02);
  }
}

TEST_CASE("Rng::below(0) is refused with a typed error, not a division by zero") {
  tandem::data::Rng rng(1);
  CHECK_THROWS_WITH_AS(rng.below(0), doctest::Contains("below(0)"), tandem::InvalidArgument);
  CHECK(rng.below(1) == 0);
}

TEST_CASE("a Dataset whose fields disagree is refused by every function that takes one, before any access") {
  using namespace tandem;
  // 4 rows of 2 features claimed, 3 values held: Standardizer::apply wrote past the vector (SIGSEGV),
  // fit, select and the regression read past it.
  data::Dataset bad;
  bad.rows = 4;
  bad.cols = 2;
  bad.features = {1, 2, 3};
  bad.targets = {1, 2, 3, 4};
  bad.source = "made.csv";
  const auto refused = [](auto&& f) {
    CHECK_THROWS_WITH_AS(f(), doctest::Contains("made.csv says 4 rows of 2 features but holds 3 values"),
                         ShapeMismatch);
  };
  refused([&] { (void)data::Standardizer::fit(bad); });
  const data::Standardizer fitted{{0, 0}, {1, 1}};
  refused([&] { fitted.apply(bad); });
  const std::size_t first[] = {0};
  refused([&] { (void)bad.select(first); });
  refused([&] { (void)data::train_test_split(bad, 0.5, 1); });
  Backend& ref = get_backend("reference");
  refused([&] { (void)ml::fit_linear_regression(ref, bad); });
  ml::LinearModel line;
  line.coefficients = {1, 1};
  refused([&] { (void)ml::predict(ref, line, bad); });
  ml::Mlp model(ref, ml::layers_from_widths({2, 3, 2}));
  refused([&] { (void)ml::evaluate(model, bad); });
  refused([&] { (void)ml::predict_classes(model, bad); });
  refused([&] { (void)ml::train(model, bad, nullptr, {}); });
  // rows * cols overflowing to the held size is refused too, and targets must be one per row.
  data::Dataset wraps = bad;
  wraps.rows = (std::size_t(1) << 63) + 1;
  wraps.features = {1, 2};
  CHECK_THROWS_AS(data::Standardizer::fit(wraps), ShapeMismatch);
  data::Dataset short_targets = bad;
  short_targets.features = {1, 2, 3, 4, 5, 6, 7, 8};
  short_targets.targets = {1, 2};
  CHECK_THROWS_WITH_AS(data::Standardizer::fit(short_targets), doctest::Contains("2 targets for 4 rows"),
                       ShapeMismatch);
  // Training and regression say the same, not "has no targets".
  CHECK_THROWS_WITH_AS(ml::train(model, short_targets, nullptr, {}), doctest::Contains("2 targets for 4 rows"),
                       ShapeMismatch);
  CHECK_THROWS_WITH_AS(ml::fit_linear_regression(ref, short_targets), doctest::Contains("2 targets for 4 rows"),
                       ShapeMismatch);
  // A standardiser whose means and scales disagree is refused before it indexes either.
  const data::Standardizer torn{{0, 0}, {1}};
  data::Dataset good = short_targets;
  good.targets.clear();
  CHECK_THROWS_WITH_AS(torn.apply(good), doctest::Contains("2 means but 1 scales"), ShapeMismatch);
}
