#include "checks.hpp"

#include <span>
#include <vector>

#include "tandem/detail/checked.hpp"
#include "tandem/errors.hpp"

namespace tandem::checks {

namespace {
std::string where(const char* op, const char* role) { return std::string(op) + ": " + role; }
}  // namespace

Backend& backend_of(const Buffer& b, const char* op, const char* role) {
  if (b.empty_handle()) {
    throw InvalidArgument(where(op, role) +
                          " is an empty Buffer handle; allocate it with Buffer(backend, dtype, count)");
  }
  return b.backend();
}

void same_backend(Backend& backend, const Buffer& b, const char* op, const char* role) {
  Backend& other = backend_of(b, op, role);
  if (&other != &backend) {
    throw DeviceMismatch(where(op, role) + " lives on backend '" + other.name() + "' (instance " +
                         std::to_string(reinterpret_cast<std::uintptr_t>(&other)) + ") but the op runs on '" +
                         backend.name() + "'; copy it over first (download, then upload on '" + backend.name() + "')");
  }
}

std::string list_dtypes(std::initializer_list<DType> allowed) {
  std::string text;
  for (DType t : allowed) {
    if (!text.empty()) text += ", ";
    text += name_of(t);
  }
  return text;
}

void dtype_in(DType t, std::initializer_list<DType> allowed, const char* op, const char* role) {
  for (DType a : allowed) {
    if (a == t) return;
  }
  throw DTypeMismatch(where(op, role) + " has dtype " + std::string(name_of(t)) + "; " + op + " takes " +
                      list_dtypes(allowed));
}

void same_dtype(DType expected, const Buffer& b, const char* op, const char* role) {
  if (b.dtype() != expected) {
    throw DTypeMismatch(where(op, role) + " has dtype " + std::string(name_of(b.dtype())) + ", expected " +
                        std::string(name_of(expected)));
  }
}

void same_size(std::size_t expected, const Buffer& b, const char* op, const char* role) {
  if (b.size() != expected) {
    throw ShapeMismatch(where(op, role) + " has " + std::to_string(b.size()) + " elements, expected " +
                        std::to_string(expected));
  }
}

void matrix_fits(const Matrix& m, const char* op, const char* role) {
  backend_of(m.buffer, op, role);
  if (m.rows < 0 || m.cols < 0) {
    throw InvalidArgument(where(op, role) + " has negative shape (" + std::to_string(m.rows) + ", " +
                          std::to_string(m.cols) + ")");
  }
  if (m.ld < m.cols || m.ld < 1) {
    throw InvalidArgument(where(op, role) + " has leading dimension " + std::to_string(m.ld) +
                          ", smaller than its row length " + std::to_string(m.cols) +
                          " (row-major: ld >= cols, and ld >= 1)");
  }
  if (m.rows == 0 || m.cols == 0) return;
  // (rows - 1) * ld + cols elements, computed without wrapping: a (2^62 x 4) view once wrapped to
  // 0 elements and passed, and an op then wrote far outside its buffer.
  std::int64_t extent = 0;
  if (!detail::mul_fits<std::int64_t>(m.rows - 1, m.ld, extent) || !detail::add_fits(extent, m.cols, extent)) {
    throw InvalidArgument(where(op, role) + " is (" + std::to_string(m.rows) + ", " + std::to_string(m.cols) +
                          ") with ld " + std::to_string(m.ld) + ": (rows - 1) * ld + cols does not fit in 64 bits");
  }
  const auto needed = static_cast<std::size_t>(extent);
  if (m.buffer.size() < needed) {
    throw ShapeMismatch(where(op, role) + " is (" + std::to_string(m.rows) + ", " + std::to_string(m.cols) +
                        ") with ld " + std::to_string(m.ld) + ", which needs " + std::to_string(needed) +
                        " elements; the buffer has " + std::to_string(m.buffer.size()));
  }
}

void same_or_disjoint(const Buffer& out, const Buffer& in, const char* op, const char* out_role, const char* in_role) {
  if (out.data() == in.data() && out.size() == in.size()) return;
  no_overlap(out, in, op, out_role, in_role);
}

void no_overlap(const Buffer& out, const Buffer& in, const char* op, const char* out_role, const char* in_role) {
  if (out.bytes() == 0 || in.bytes() == 0) return;
  const auto* o = static_cast<const char*>(out.data());
  const auto* i = static_cast<const char*>(in.data());
  if (o < i + in.bytes() && i < o + out.bytes()) {
    throw InvalidArgument(std::string(op) + ": " + out_role + " overlaps " + in_role +
                          " in memory; write the result to a separate buffer");
  }
}

void classes_in_range(const Buffer& labels, std::int64_t classes, Queue q, const char* op) {
  std::vector<std::int32_t> host(labels.size());
  labels.download(std::span<std::int32_t>(host), q);
  for (std::size_t r = 0; r < host.size(); ++r) {
    if (host[r] < 0 || host[r] >= classes) {
      throw InvalidArgument(std::string(op) + ": label " + std::to_string(host[r]) + " in row " + std::to_string(r) +
                            " is not a class of " + std::to_string(classes) + " columns (0 to " +
                            std::to_string(classes - 1) + ")");
    }
  }
}

namespace {

template <class V>
void variant_in(const Backend& backend, std::string_view algorithm, V variant, const std::vector<V>& known) {
  if (variant == V::automatic) return;
  std::string list;
  for (const V v : known) {
    if (v == variant) return;
    list.append(list.empty() ? "" : ", ").append(name_of(v));
  }
  throw Unsupported(std::string(algorithm) + ": backend '" + backend.name() + "' has no variant '" +
                    std::string(name_of(variant)) + "'; " +
                    (known.empty() ? std::string("it has one way only (pass no variant)") : "it has: " + list));
}

}  // namespace

void variant_in(const Backend& backend, ReduceVariant variant) {
  variant_in(backend, "reduce", variant, backend.reduce_variants());
}

void variant_in(const Backend& backend, ScanVariant variant) {
  variant_in(backend, "scan", variant, backend.scan_variants());
}

}  // namespace tandem::checks
