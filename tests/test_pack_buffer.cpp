// The packing memory the openmp backend's matmul tiers keep per thread between calls
// (backends/openmp/pack_buffer.hpp): aligned for the micro-kernels, the same block again for a
// call that fits, huge-page aligned from 2 MiB, and a block past the kept size handed out for one
// call and freed with it (the sanitizer build's leak check sees one that is not).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

#ifdef TANDEM_TEST_HAVE_OPENMP
#include "../backends/openmp/pack_buffer.hpp"
#endif

TEST_CASE("openmp's kept packing memory: aligned, reused, and a block past 256 MiB freed after its call") {
#ifndef TANDEM_TEST_HAVE_OPENMP
  std::printf("SKIPPED: this build has no openmp backend\n");
#else
  using tandem::openmp::PackBuffer;
  using tandem::openmp::PackSlot;
  const auto address = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
  std::uintptr_t kept = 0;
  {
    PackBuffer<float> small(PackSlot::accumulators, 1000);
    REQUIRE(small.data != nullptr);
    CHECK(address(small.data) % 64 == 0);
    std::memset(small.data, 0, 1000 * sizeof(float));
    kept = address(small.data);
  }
  {
    PackBuffer<float> again(PackSlot::accumulators, 500);  // fits: the same block
    CHECK(address(again.data) == kept);
  }
  {
    PackBuffer<std::uint16_t> huge(PackSlot::accumulators, std::size_t(3) << 20);  // 6 MiB: grown
    CHECK(address(huge.data) % (std::size_t(2) << 20) == 0);
    huge.data[(std::size_t(3) << 20) - 1] = 7;
    kept = address(huge.data);
  }
  {
    const std::size_t big = (std::size_t(257) << 20) / sizeof(float);
    PackBuffer<float> once(PackSlot::accumulators, big);
    REQUIRE(once.data != nullptr);
    CHECK(address(once.data) != kept);
    CHECK(address(once.data) % 64 == 0);
    once.data[0] = 1;
    once.data[big - 1] = 2;
    CHECK(once.data[big - 1] == 2);
  }
  PackBuffer<float> after(PackSlot::accumulators, 16);  // the kept block is still the 6 MiB one
  CHECK(address(after.data) == kept);
#endif
}
