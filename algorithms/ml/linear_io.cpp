// Saving and loading a linear model. Format, version 1, little-endian:
//   offset 0   8 bytes  magic "TANDEMLR"
//          8   u32      format version (1)
//         12   u64      feature count F
//         20   f64      intercept
//         28   F x f64  coefficients (in the units of the original features)
//    end - 4   u32      CRC-32 (IEEE) of every byte before it
// As for MLP files, the checksum is verified first, so a corrupt file is a DataError and never an
// allocation sized by garbage.
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "model_file.hpp"
#include "tandem/data.hpp"
#include "tandem/regression.hpp"

namespace tandem::ml {
namespace {
constexpr char kMagic[8] = {'T', 'A', 'N', 'D', 'E', 'M', 'L', 'R'};
constexpr std::uint32_t kVersion = 1;
}  // namespace

std::vector<unsigned char> serialize(const LinearModel& model) {
  model_file::Writer w;
  w.bytes(kMagic, 8);
  w.le<std::uint32_t>(kVersion);
  w.le<std::uint64_t>(model.coefficients.size());
  w.f64(model.intercept);
  for (double c : model.coefficients) w.f64(c);
  w.le<std::uint32_t>(model_file::crc32(w.out.data(), w.out.size()));
  return w.out;
}

LinearModel deserialize_linear_model(const std::vector<unsigned char>& bytes, const std::string& source) {
  model_file::Reader r = model_file::open(bytes, source, kMagic, kVersion, 32, "linear model");
  const auto features = r.le<std::uint64_t>("the feature count");
  if (features == 0 || features != (bytes.size() - 32) / 8 || (bytes.size() - 32) % 8 != 0) {
    r.fail(std::to_string(features) + " features do not match the file's length (" + std::to_string(bytes.size()) +
           " bytes)");
  }
  LinearModel m;
  m.intercept = r.f64("the intercept");
  m.coefficients.resize(features);
  for (double& c : m.coefficients) c = r.f64("a coefficient");
  if (!std::isfinite(m.intercept)) r.fail("the intercept is not finite");
  for (double c : m.coefficients) {
    if (!std::isfinite(c)) r.fail("a coefficient is not finite");
  }
  if (!r.at_end()) r.fail("unexpected bytes after the last coefficient");
  m.epochs_run = 0;
  m.converged = true;
  return m;
}

void save(const LinearModel& model, const std::string& path) {
  const std::vector<unsigned char> bytes = serialize(model);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IoError(path + ": cannot write the model (" + std::strerror(errno) + ")");
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw IoError(path + ": writing the model failed (disk full?)");
}

LinearModel load_linear_model(const std::string& path) { return deserialize_linear_model(data::read_file(path), path); }

}  // namespace tandem::ml
