// libFuzzer target: the CSV reader (data::parse_csv) with options drawn from the input's first
// byte, then what a loaded data set goes through (class labels, a split, standardisation).
// Every outcome but a result or a tandem::Error is a finding (ci/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tandem/data.hpp"
#include "tandem/errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  if (size == 0) return 0;
  using namespace tandem;
  const std::uint8_t knobs = bytes[0];
  data::CsvOptions o;
  constexpr char kDelimiters[] = {'\0', ',', ';', '\t', ' ', '|', '"', '\n'};
  o.delimiter = kDelimiters[knobs & 7];
  o.header = static_cast<data::CsvOptions::Header>((knobs >> 3) % 3);
  constexpr long kLabels[] = {0, -1, 1, -2};
  if ((knobs >> 5) & 1) o.label_column = kLabels[(knobs >> 6) & 3];
  // Small caps, so that the fuzzer also reaches them (and its memory limit holds).
  o.max_columns = 4096;
  o.max_values = std::size_t(1) << 20;
  const std::string_view text(reinterpret_cast<const char*>(bytes + 1), size - 1);
  try {
    data::Dataset d = data::parse_csv(text, "fuzz.csv", o);
    if (d.features.size() != d.rows * d.cols) __builtin_trap();
    if (!d.targets.empty() && d.targets.size() != d.rows) __builtin_trap();
    if (!d.targets.empty()) {
      try {
        (void)d.class_count();
      } catch (const DataError&) {
      }
    }
    if (d.rows >= 2) {
      const data::Split s = data::train_test_split(d, 0.5, knobs);
      if (s.train.rows + s.test.rows != d.rows) __builtin_trap();
      const data::Standardizer st = data::Standardizer::fit(s.train);
      data::Dataset t = s.test;
      st.apply(t);
    }
  } catch (const Error&) {
    // Refused with a typed error: the expected outcome for bad input.
  }
  return 0;
}
