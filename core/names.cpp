// Names of enums and the errors' message formatting.
#include <initializer_list>
#include <string>

#include "tandem/backend.hpp"
#include "tandem/dtype.hpp"
#include "tandem/errors.hpp"

namespace tandem {

namespace {
std::string format_bytes(std::size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 6) {
    value /= 1024.0;
    ++unit;
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}
}  // namespace

OutOfMemory::OutOfMemory(std::size_t bytes_requested, std::size_t bytes_free, const std::string& backend)
    : Error("out of memory on backend '" + backend + "': asked for " + std::to_string(bytes_requested) + " bytes (" +
            format_bytes(bytes_requested) + "), " + std::to_string(bytes_free) + " bytes (" + format_bytes(bytes_free) +
            ") free; free buffers, call empty_cache(), or use smaller sizes"),
      bytes_requested_(bytes_requested),
      bytes_free_(bytes_free),
      backend_(backend) {}

DType parse_dtype(std::string_view name) {
  for (DType t : {DType::f16, DType::bf16, DType::f32, DType::f64, DType::i32}) {
    if (name == name_of(t)) return t;
  }
  throw InvalidArgument("unknown dtype '" + std::string(name) + "': use one of f16, bf16, f32, f64, i32");
}

std::string_view name_of(BinaryOp op) {
  return visit(op, []<class Row>(Row) { return Row::name; });
}

std::string_view name_of(UnaryOp op) {
  return visit(op, []<class Row>(Row) { return Row::name; });
}

UnaryOp parse_activation(std::string_view name) {
  for (UnaryOp op : kActivations) {
    if (name == name_of(op)) return op;
  }
  throw InvalidArgument("unknown activation '" + std::string(name) + "': use " + activation_names());
}

std::string activation_names() {
  std::string all;
  const std::size_t n = std::size(kActivations);
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) all += i + 1 == n ? " or " : ", ";
    all += name_of(kActivations[i]);
  }
  return all;
}

std::string_view name_of(ReduceOp op) { return traits_of(op).name; }

std::string_view name_of(MatmulTier tier) {
  switch (tier) {
    case MatmulTier::automatic: return "auto";
    case MatmulTier::naive: return "naive";
    case MatmulTier::tiled: return "tiled";
    case MatmulTier::register_blocked: return "register_blocked";
    case MatmulTier::tensor_core: return "tensor_core";
    case MatmulTier::vendor: return "vendor";
  }
  return "?";
}

MatmulTier parse_matmul_tier(std::string_view name) {
  for (MatmulTier t : {MatmulTier::automatic, MatmulTier::naive, MatmulTier::tiled, MatmulTier::register_blocked,
                       MatmulTier::tensor_core, MatmulTier::vendor}) {
    if (name == name_of(t)) return t;
  }
  throw InvalidArgument("unknown matmul tier '" + std::string(name) +
                        "': use one of auto, naive, tiled, register_blocked, tensor_core, vendor");
}

namespace {

template <class E>
E parse_variant(std::string_view name, std::initializer_list<E> all, std::string_view what) {
  if (name.empty()) return E::automatic;
  if (name == "cub" || name == "rocprim") return E::vendor;
  std::string names;
  for (E v : all) {
    if (name == name_of(v)) return v;
    names.append(names.empty() ? "" : ", ").append(name_of(v));
  }
  throw InvalidArgument("unknown " + std::string(what) + " variant '" + std::string(name) + "': use one of " + names +
                        " (cub and rocprim name vendor too)");
}

}  // namespace

std::string_view name_of(ReduceVariant variant) {
  switch (variant) {
    case ReduceVariant::automatic: return "auto";
    case ReduceVariant::single_pass: return "single_pass";
    case ReduceVariant::warp_shuffle: return "warp_shuffle";
    case ReduceVariant::shared_tree: return "shared_tree";
    case ReduceVariant::vendor: return "vendor";
  }
  return "?";
}

std::string_view name_of(BackendKind kind) {
  switch (kind) {
    case BackendKind::cpu: return "cpu";
    case BackendKind::gpu: return "gpu";
    case BackendKind::simulator: return "simulator";
  }
  return "?";
}

std::string_view name_of(ScanVariant variant) {
  switch (variant) {
    case ScanVariant::automatic: return "auto";
    case ScanVariant::decoupled_lookback: return "decoupled_lookback";
    case ScanVariant::three_pass: return "three_pass";
    case ScanVariant::single_block: return "single_block";
    case ScanVariant::vendor: return "vendor";
  }
  return "?";
}

ReduceVariant parse_reduce_variant(std::string_view name) {
  using enum ReduceVariant;
  return parse_variant(name, {automatic, single_pass, warp_shuffle, shared_tree, vendor}, "reduce");
}

ScanVariant parse_scan_variant(std::string_view name) {
  using enum ScanVariant;
  return parse_variant(name, {automatic, decoupled_lookback, three_pass, single_block, vendor}, "scan");
}

std::string describe(const MemoryPlace& place) {
  switch (place.kind) {
    case MemoryPlace::Kind::host: return "host memory";
    case MemoryPlace::Kind::cuda: return "CUDA device " + std::to_string(place.device);
    case MemoryPlace::Kind::rocm: return "ROCm device " + std::to_string(place.device);
    case MemoryPlace::Kind::other: break;
  }
  return "device memory of no DLPack kind";
}

}  // namespace tandem
