// Data sets on the host: loaders for CSV and MNIST IDX files (gzip-compressed or not), a seeded
// train/test split and feature standardisation. Everything here runs on the host; the training
// loops upload what they need to the backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tandem::data {

// rows samples of cols features (row-major, float64), and one target per sample: the regression
// target, or the class of a classification sample (an integer 0, 1, ...). targets is empty when
// the data has none.
struct Dataset {
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::vector<double> features;  // (rows, cols)
  std::vector<double> targets;   // rows, or empty
  std::string source;            // where it came from, for messages

  // Sample r's features.
  std::span<const double> row(std::size_t r) const { return {features.data() + r * cols, cols}; }
  // The targets as class indices; DataError when one is not an integer in [0, 2^31).
  std::vector<std::int32_t> class_labels() const;
  // 1 + the largest class index (0 for no targets).
  std::int32_t class_count() const;
  // The samples at these indices, in this order.
  Dataset select(std::span<const std::size_t> indices) const;
  // Throws ShapeMismatch naming `who` and the source when the fields disagree: features must
  // hold rows * cols values (without overflow), targets none or one per row. The fields are
  // public, so every function that takes a Dataset calls this before it indexes one.
  void check(const char* who) const;
};

// Reads a whole file, inflating it when it is gzip-compressed (detected by its magic bytes, not
// its name). DataError names the file and the byte offset where a compressed stream is corrupt.
// IoError when it cannot be read (a directory, no permission); DataError past `limit` bytes, read
// or inflated (a device such as /dev/zero, a gzip bomb), checked before the memory is taken.
std::vector<unsigned char> read_file(const std::string& path, std::size_t limit = std::size_t(4) << 30);
// The bytes as read_file returns them: inflated when they start with the gzip magic, else as they
// are. DataError (naming `source`) for a corrupt or truncated stream, or past `limit` inflated.
std::vector<unsigned char> decompress(std::vector<unsigned char> bytes, const std::string& source,
                                      std::size_t limit = std::size_t(4) << 30);

struct CsvOptions {
  // Field separator; '\0' detects it from the first line outside quotes (',' then ';' then tab,
  // else runs of blanks). ' ' also means runs of blanks (and then quotes are plain characters).
  char delimiter = '\0';
  enum class Header { detect, yes, no };
  // detect: the first line is a header when none of its fields is a number, data when all are;
  // a line with both is a DataError naming it (a typo must not turn a data row into a header).
  Header header = Header::detect;
  // The column holding the target: 0-based; negative counts from the end (-1 is the last).
  // nullopt: every column is a feature and targets stays empty.
  std::optional<long> label_column;
  // Caps that keep a hostile or mistaken file (a line of a billion commas, gigabytes of "0,")
  // from taking the machine's memory: a DataError names the line and the cap. Each field costs
  // about 32 bytes while its line is parsed; each value 8 bytes in the data set (2^29 values are
  // 4 GiB as doubles).
  std::size_t max_columns = std::size_t(1) << 20;
  std::size_t max_values = std::size_t(1) << 29;
};
// Parses a CSV file of numbers, quoted as RFC 4180 has it: a field in double quotes may hold the
// delimiter, line breaks and quotes written twice (""); lines end in LF or CRLF. DataError names
// file, line and column for a field that is not a number, a line with another field count than
// the first, a quote never closed, or a file with no data.
Dataset read_csv(const std::string& path, const CsvOptions& options = {});
// Parses CSV text already in memory; `source` names it in messages.
Dataset parse_csv(std::string_view text, const std::string& source, const CsvOptions& options = {});
// "last", "first", "none" or an index (negative from the end), as the CLI's --label-column takes it.
std::optional<long> parse_label_column(const std::string& spec);

// Sets d's targets from a one-column data set t (a separate target file), sample by sample.
// DataError when t has more than one column or another number of rows.
void attach_targets(Dataset& d, const Dataset& t);

// MNIST IDX: an images file (n, d1, d2, ...) of any IDX element type and a labels file (n) of
// integers. Features are the raw values (pixels 0..255 for MNIST), one row per image.
// DataError names the file and byte offset of a bad magic number, a truncated body or a size
// that does not match the header.
Dataset read_idx(const std::string& images_path, const std::string& labels_path);
// One IDX file as a flat array of values with its dimensions.
struct IdxArray {
  std::vector<std::uint32_t> dims;
  std::vector<double> values;
};
IdxArray parse_idx(std::span<const unsigned char> bytes, const std::string& source);

// Splits the samples at random (seeded: the same seed, the same split on every platform) into
// train and test; test holds round(test_fraction * rows) samples, train the rest.
struct Split {
  Dataset train;
  Dataset test;
};
Split train_test_split(const Dataset& d, double test_fraction, std::uint64_t seed);

// Per-feature affine map x -> (x - mean) / scale, fitted on one data set (the training split)
// and applied to others. A constant feature gets scale 1 (it becomes 0, not NaN).
struct Standardizer {
  std::vector<double> mean;
  std::vector<double> scale;
  static Standardizer fit(const Dataset& d);
  void apply(Dataset& d) const;
  bool empty() const { return mean.empty(); }
};

// A small, portable random generator (splitmix64): the same sequence on every platform and
// compiler, unlike the standard distributions. Used for splits, shuffles and initialisation.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  // Uniform in [0, n), without modulo bias; n >= 1.
  std::uint64_t below(std::uint64_t n);
  // Uniform in [0, 1).
  double uniform();
  // Standard normal (Box-Muller).
  double normal();
  // A random permutation of 0..n-1 (Fisher-Yates).
  std::vector<std::size_t> permutation(std::size_t n);

 private:
  std::uint64_t state_;
  bool has_spare_ = false;
  double spare_ = 0;
};

}  // namespace tandem::data
