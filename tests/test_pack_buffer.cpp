// The packing memory the openmp backend's matmul tiers keep per thread between calls
// (backends/openmp/pack_buffer.hpp): aligned for the micro-kernels, the same block again for a
// call that fits, huge-page aligned from 2 MiB, and a block past the kept size handed out for one
// call and freed with it (glibc's count of mapped bytes says so; under the sanitizers, whose
// allocator glibc does not see, their leak check does).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

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
  constexpr std::size_t kHuge = std::size_t(2) << 20;
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
  for (const std::size_t mib : {6, 10}) {  // grown twice: the 6 MiB block, huge-page aligned, is freed
    PackBuffer<std::uint16_t> grown(PackSlot::accumulators, mib << 19);
    CHECK(address(grown.data) % kHuge == 0);
    grown.data[(mib << 19) - 1] = 7;
    kept = address(grown.data);
  }
  const std::size_t big = (std::size_t(257) << 20) / sizeof(float);
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 33)
  const auto mapped = [] { return static_cast<std::size_t>(mallinfo2().hblkhd); };
  const std::size_t before = mapped();
  std::size_t during = 0;
#endif
  {
    PackBuffer<float> once(PackSlot::accumulators, big);
    REQUIRE(once.data != nullptr);
    CHECK(address(once.data) % 64 == 0);
    once.data[0] = 1;
    once.data[big - 1] = 2;
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 33)
    during = mapped();
#endif
  }
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 33)
  if (during >= before + big * sizeof(float)) {
    CHECK_MESSAGE(mapped() + big * sizeof(float) <= during, "the 257 MiB block was not freed with its buffer");
  } else {
    std::printf("note: glibc does not see this allocator's blocks (a sanitizer build): its leak check covers it\n");
  }
#endif
  PackBuffer<float> after(PackSlot::accumulators, 16);  // the kept block is still the 10 MiB one
  CHECK(address(after.data) == kept);
#endif
}
