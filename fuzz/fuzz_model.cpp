// libFuzzer target: the model files (Mlp::deserialize, as Mlp::load uses it, and the linear
// model's). When the first byte is odd the rest gets a correct CRC-32 trailer, so that the fuzzer
// gets past the checksum to the fields behind it. A model that loads must forward a batch and
// save to the same bytes. Every outcome but that or a tandem::Error is a finding (ci/fuzz.sh).
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tandem/errors.hpp"
#include "tandem/mlp.hpp"
#include "tandem/registry.hpp"
#include "tandem/regression.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  using namespace tandem;
  if (size == 0) return 0;
  std::vector<unsigned char> file(bytes + 1, bytes + size);
  if ((bytes[0] & 1) != 0 && file.size() >= 4) {
    const std::size_t body = file.size() - 4;
    const auto crc = static_cast<std::uint32_t>(::crc32(0L, file.data(), static_cast<uInt>(body)));
    for (int i = 0; i < 4; ++i) file[body + std::size_t(i)] = static_cast<unsigned char>(crc >> (8 * i));
  }
  static Backend& be = get_backend("reference");
  try {
    ml::Mlp model = ml::Mlp::deserialize(be, file, "fuzz.model");
    if (model.serialize() != file) __builtin_trap();
    Buffer x(be, model.options().dtype, model.inputs());
    x.fill(0.5);
    if (model.inputs() * model.outputs() <= (std::size_t(1) << 20)) (void)model.forward(matrix(x, 1, std::int64_t(model.inputs())));
  } catch (const Error&) {
  }
  try {
    const ml::LinearModel m = ml::deserialize_linear_model(file, "fuzz.linear");
    if (ml::serialize(m) != file) __builtin_trap();
  } catch (const Error&) {
  }
  return 0;
}
