// libFuzzer target: the gzip path (data::decompress, as read_file uses it) with a 16 MiB limit,
// and the CSV reader on what it inflates. Every outcome but a result or a tandem::Error is a
// finding (ci/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tandem/data.hpp"
#include "tandem/errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  using namespace tandem;
  constexpr std::size_t kLimit = std::size_t(16) << 20;
  try {
    const std::vector<unsigned char> plain = data::decompress({bytes, bytes + size}, "fuzz.gz", kLimit);
    if (plain.size() > kLimit) __builtin_trap();
    data::CsvOptions o;
    o.max_columns = 4096;
    o.max_values = std::size_t(1) << 20;
    (void)data::parse_csv(std::string_view(reinterpret_cast<const char*>(plain.data()), plain.size()), "fuzz.csv",
                          o);
  } catch (const Error&) {
  }
  return 0;
}
