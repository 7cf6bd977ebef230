// libFuzzer target: the DLPack importer (from_dlpack) on tensors whose header fields come from
// the input: ndim, dtype, device, byte offset, shape and strides, over a small real array. The
// importer must refuse with a tandem::Error or return a buffer whose element count is the
// product of the shape (no wrap-around) and whose bytes lie inside the array (only shapes that
// fit are accepted by a correct producer's data, so the target checks the arithmetic, never reads
// past the array); the round trip through to_dlpack must give back the same shape. Every other
// outcome is a finding (ci/fuzz.sh).
#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tandem/dlpack.hpp"
#include "tandem/errors.hpp"
#include "tandem/registry.hpp"

namespace {

alignas(64) unsigned char g_array[4096];
int g_deleted = 0;

struct Reader {
  const std::uint8_t* p;
  std::size_t n;
  template <class T>
  T take() {
    T v{};
    const std::size_t k = n < sizeof(T) ? n : sizeof(T);
    std::memcpy(&v, p, k);
    p += k;
    n -= k;
    return v;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  using namespace tandem;
  Reader in{bytes, size};
  const int ndim = in.take<std::uint8_t>() % 9;  // 0 to 8 dimensions
  std::vector<std::int64_t> shape(static_cast<std::size_t>(ndim)), strides(static_cast<std::size_t>(ndim));
  DLManagedTensor* t = new DLManagedTensor{};
  t->dl_tensor.data = g_array;
  // The device type as a C producer may store it: any 32-bit value, written as bytes (a C++ cast
  // of a value outside the enum would be undefined in this program, not in tandem).
  const std::int32_t device = in.take<std::uint8_t>() % 2 == 0 ? std::int32_t(kDLCPU) : in.take<std::int32_t>();
  std::memcpy(&t->dl_tensor.device.device_type, &device, sizeof device);
  t->dl_tensor.ndim = ndim;
  t->dl_tensor.dtype = {in.take<std::uint8_t>(), in.take<std::uint8_t>(), in.take<std::uint16_t>()};
  t->dl_tensor.byte_offset = in.take<std::uint8_t>() % 2 == 0 ? 0 : in.take<std::uint64_t>();
  for (auto& d : shape) d = in.take<std::uint8_t>() % 2 == 0 ? in.take<std::uint8_t>() % 8 : in.take<std::int64_t>();
  const bool with_strides = in.take<std::uint8_t>() % 2 == 1;
  for (auto& s : strides) s = in.take<std::uint8_t>() % 2 == 0 ? in.take<std::uint8_t>() % 64 : in.take<std::int64_t>();
  t->dl_tensor.shape = shape.data();
  t->dl_tensor.strides = with_strides ? strides.data() : nullptr;
  t->deleter = [](DLManagedTensor* self) {
    ++g_deleted;
    delete self;
  };
  static Backend& be = get_backend("reference");
  const int deleted_before = g_deleted;
  try {
    Tensor got = from_dlpack(be, t);
    // The element count is the shape's product, computed here without overflow: a wrap-around
    // (a (2^32, 2^32) tensor as 0 elements) would let a reader past the producer's memory.
    unsigned __int128 product = 1;
    for (const std::int64_t d : shape) product *= static_cast<unsigned __int128>(d < 0 ? 0 : d);
    if (product != got.buffer.size()) __builtin_trap();
    if (got.shape != shape) __builtin_trap();
    DLManagedTensor* back = to_dlpack(got);
    if (back->dl_tensor.ndim != ndim) __builtin_trap();
    back->deleter(back);
  } catch (const tandem::Error&) {
    // Refused: the caller still owns the tensor, and it was not deleted.
    if (g_deleted != deleted_before) __builtin_trap();
    delete t;
    return 0;
  }
  return 0;
}
