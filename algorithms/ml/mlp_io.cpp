// Saving and loading a trained MLP. Format, version 1, little-endian:
//   offset 0   8 bytes  magic "TANDEMNN"
//          8   u32      format version (1)
//         12   u32      dtype of the parameters (DType: 2 = f32, 3 = f64)
//         16   u32      loss (LossKind)
//         20   u32      layer count L
//         24   L x {u32 kind (1 linear, else the activation's model_code in the op table), u64 inputs,
//                   u64 outputs}
//              u64 S (standardiser features: 0 or inputs), S x f64 mean, S x f64 scale
//              per parameter buffer (layer order, W then b): u64 count, count values of dtype
//    end - 4   u32      CRC-32 (IEEE) of every byte before it
// The checksum is verified before anything else is read, so a corrupt or truncated file is a
// DataError and never an allocation sized by garbage; the structure is then checked field by field.
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "host_data.hpp"
#include "model_file.hpp"
#include "tandem/data.hpp"
#include "tandem/errors.hpp"
#include "tandem/mlp.hpp"

namespace tandem::ml {
namespace {

using model_file::crc32;
using model_file::Reader;
using model_file::Writer;

constexpr char kMagic[8] = {'T', 'A', 'N', 'D', 'E', 'M', 'N', 'N'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kMaxWidth = std::size_t(1) << 31;
constexpr std::uint32_t kLinearCode = 1;

std::uint32_t code_of(LayerKind k) {
  if (k.is_linear()) return kLinearCode;
  return visit_activation(
      k.op(), []<class Row>(Row) { return Row::model_code; }, [] { return 0u; });
}

// The layer a saved code stands for; false when no layer has it.
bool kind_of_code(std::uint32_t code, LayerKind& kind) {
  if (code == kLinearCode) {
    kind = LayerKind::linear;
    return true;
  }
  for (UnaryOp op : kActivations) {
    if (code_of(LayerKind::activation(op)) == code) {
      kind = LayerKind::activation(op);
      return true;
    }
  }
  return false;
}

}  // namespace

std::vector<unsigned char> Mlp::serialize() const {
  Writer w;
  w.bytes(kMagic, 8);
  w.le<std::uint32_t>(kVersion);
  w.le<std::uint32_t>(static_cast<std::uint32_t>(options_.dtype));
  w.le<std::uint32_t>(static_cast<std::uint32_t>(options_.loss));
  w.le<std::uint32_t>(static_cast<std::uint32_t>(layers_.size()));
  for (const LayerSpec& l : layers_) {
    w.le<std::uint32_t>(code_of(l.kind));
    w.le<std::uint64_t>(l.inputs);
    w.le<std::uint64_t>(l.outputs);
  }
  w.le<std::uint64_t>(standardizer.mean.size());
  for (double v : standardizer.mean) w.f64(v);
  for (double v : standardizer.scale) w.f64(v);
  for (const Buffer& p : params_) {
    w.le<std::uint64_t>(p.size());
    std::vector<unsigned char> raw(p.bytes());
    p.download_bytes(raw.data(), raw.size());
    w.bytes(raw.data(), raw.size());  // the host is little-endian (x86-64, arm64)
  }
  w.le<std::uint32_t>(crc32(w.out.data(), w.out.size()));
  return w.out;
}

Mlp Mlp::deserialize(Backend& backend, const std::vector<unsigned char>& bytes, const std::string& source) {
  Reader r = model_file::open(bytes, source, kMagic, kVersion, 28, "model file");
  MlpOptions o;
  const auto dtype = r.le<std::uint32_t>("the dtype");
  if (dtype != static_cast<std::uint32_t>(DType::f32) && dtype != static_cast<std::uint32_t>(DType::f64)) {
    r.fail("parameter dtype code " + std::to_string(dtype) + " is not f32 or f64");
  }
  o.dtype = static_cast<DType>(dtype);
  const auto loss = r.le<std::uint32_t>("the loss");
  if (loss != 1 && loss != 2) r.fail("unknown loss code " + std::to_string(loss));
  o.loss = static_cast<LossKind>(loss);
  const auto count = r.le<std::uint32_t>("the layer count");
  // Each layer takes 20 bytes of the file: the file's size bounds the count (a fixed cap of 4096
  // once refused deeper models that save() had written).
  if (count == 0 || std::size_t(count) > (bytes.size() - r.offset()) / 20) {
    r.fail(std::to_string(count) + " layers do not fit in the " + std::to_string(bytes.size()) + " bytes of the file");
  }
  std::vector<LayerSpec> layers(count);
  for (LayerSpec& l : layers) {
    const auto kind = r.le<std::uint32_t>("a layer");
    if (!kind_of_code(kind, l.kind)) r.fail("unknown layer kind " + std::to_string(kind));
    l.inputs = r.le<std::uint64_t>("a layer");
    l.outputs = r.le<std::uint64_t>("a layer");
    if (l.inputs == 0 || l.outputs == 0 || l.inputs > kMaxWidth || l.outputs > kMaxWidth) {
      r.fail("layer width " + std::to_string(l.inputs) + " x " + std::to_string(l.outputs) + " is out of range");
    }
  }
  // Every parameter must fit in the bytes that are left before anything is allocated.
  std::size_t param_bytes = 0;
  for (const LayerSpec& l : layers) {
    if (l.kind == LayerKind::linear) {
      if (l.inputs * l.outputs > (bytes.size() / size_of(o.dtype))) r.fail("a layer is larger than the whole file");
      param_bytes += (l.inputs * l.outputs + l.outputs) * size_of(o.dtype);
    }
  }
  if (param_bytes > bytes.size()) r.fail("the layers need more parameters than the file holds");
  Mlp model = [&] {
    try {
      return Mlp(backend, layers, o);
    } catch (const Error& e) {
      r.fail(std::string("the layers do not form a model: ") + e.what());
    }
  }();
  const auto s = r.le<std::uint64_t>("the standardiser");
  if (s != 0 && s != model.inputs()) {
    r.fail("a standardiser of " + std::to_string(s) + " features for a model of " + std::to_string(model.inputs()));
  }
  r.need(16 * s, "the standardiser");
  model.standardizer.mean.resize(s);
  model.standardizer.scale.resize(s);
  for (double& v : model.standardizer.mean) {
    v = r.f64("the standardiser");
    if (!std::isfinite(v)) r.fail("a standardiser mean is not finite");
  }
  for (double& v : model.standardizer.scale) {
    v = r.f64("the standardiser");
    // At least DBL_MIN: dividing by a subnormal scale overflows to Inf (what fit() makes is 1 or normal).
    if (!std::isfinite(v) || !(v >= std::numeric_limits<double>::min())) {
      r.fail("a standardiser scale is not a finite positive number of at least 2^-1022 (it divides every feature)");
    }
  }
  for (Buffer& p : model.params_) {
    const auto n = r.le<std::uint64_t>("a parameter count");
    if (n != p.size()) {
      r.fail("a parameter buffer of " + std::to_string(n) + " values where the layers need " +
             std::to_string(p.size()));
    }
    const std::size_t at = r.offset();
    const unsigned char* raw = r.take(p.bytes(), "the parameters");
    // A NaN or Inf weight makes every prediction NaN (argmax: class 0): refused with where it is.
    for (std::size_t i = 0; i < n; ++i) {
      double v;
      if (o.dtype == DType::f32) {
        float f;
        std::memcpy(&f, raw + 4 * i, 4);
        v = f;
      } else {
        std::memcpy(&v, raw + 8 * i, 8);
      }
      if (!std::isfinite(v)) {
        throw DataError(source + ": byte offset " + std::to_string(at + i * size_of(o.dtype)) + ": parameter " +
                        std::to_string(i) + " of buffer " + std::to_string(&p - model.params_.data()) + " is " +
                        (std::isnan(v) ? "NaN" : "infinite") + "; a model with such a weight cannot predict");
      }
    }
    p.upload_bytes(raw, p.bytes());
  }
  if (!r.at_end()) r.fail("unexpected bytes after the last parameter");
  model.backend().synchronize(Queue{});
  return model;
}

void Mlp::save(const std::string& path) const {
  const std::vector<unsigned char> bytes = serialize();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IoError(path + ": cannot write the model (" + std::strerror(errno) + ")");
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw IoError(path + ": writing the model failed (disk full?)");
}

Mlp Mlp::load(Backend& backend, const std::string& path) {
  // Bounded, typed reads: a directory, /dev/zero or a huge file end in IoError or DataError.
  return deserialize(backend, data::read_file(path), path);
}

}  // namespace tandem::ml
