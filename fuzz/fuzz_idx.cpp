// libFuzzer target: the MNIST IDX reader (data::parse_idx). Every outcome but a result or a
// tandem::Error is a finding (ci/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <span>

#include "tandem/data.hpp"
#include "tandem/errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  using namespace tandem;
  try {
    const data::IdxArray a = data::parse_idx(std::span<const unsigned char>(bytes, size), "fuzz.idx");
    std::size_t count = 1;
    for (std::uint32_t d : a.dims) count *= d;
    if (a.dims.empty() || count != a.values.size()) __builtin_trap();
  } catch (const Error&) {
  }
  return 0;
}
