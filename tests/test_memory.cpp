// Buffers, the caching allocator's statistics, scopes, OutOfMemory, the leak report and the op profile.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "support.hpp"
#include "tandem/profile.hpp"
#include "tandem/tandem.hpp"

using namespace tandem;

TEST_CASE("upload, download, slice, copy and fill") {
  Backend& be = get_backend("reference");
  const std::vector<double> h = {1, 2, 3, 4, 5};
  Buffer b = Buffer::from(be, h);
  CHECK(b.dtype() == DType::f64);
  CHECK(b.size() == 5);
  CHECK(b.to_vector<double>() == h);
  CHECK(b.slice(1, 3).to_vector<double>() == std::vector<double>{2, 3, 4});
  CHECK_THROWS_AS(b.slice(3, 3), InvalidArgument);
  Buffer c(be, DType::f64, 5);
  c.copy_from(b);
  CHECK(c.to_vector<double>() == h);
  Buffer part = c.slice(2, 2);
  part.fill(-1);
  CHECK(c.to_vector<double>() == std::vector<double>{1, 2, -1, -1, 5});
  CHECK_THROWS_AS(b.upload(std::vector<float>(5)), DTypeMismatch);
  CHECK_THROWS_AS(b.upload(std::vector<double>(4)), ShapeMismatch);
  Buffer empty;
  CHECK_THROWS_AS(empty.backend(), InvalidArgument);
  HostBuffer pinned(be, DType::f32, 16);
  CHECK_FALSE(pinned.is_pinned());  // CPU backends have no page-locked memory to offer
  CHECK(pinned.span<float>().size() == 16);
  CHECK_THROWS_AS(pinned.span<double>(), DTypeMismatch);
  // More host memory than the machine has: OutOfMemory with what is free, not "0 bytes free".
  try {
    HostBuffer huge(be, DType::f32, std::size_t(1) << 60);
    FAIL("a 4 EiB host buffer was allocated");
  } catch (const OutOfMemory& e) {
    CHECK(e.bytes_free() > 0);
    CHECK(std::string(e.what()).find(" 0 bytes") == std::string::npos);
  }
}

TEST_CASE("f16 and bf16 round to nearest even and keep NaN and Inf") {
  CHECK(float(half(1.0f)) == 1.0f);
  CHECK(float(half(65504.0f)) == 65504.0f);
  CHECK(std::isinf(float(half(65520.0f))));              // rounds up past the largest half
  CHECK(float(half(1.0f + 1.0f / 2048)) == 1.0f);        // tie goes to even
  CHECK(float(half(5.96046448e-8f)) == 5.96046448e-8f);  // smallest subnormal
  CHECK(std::isnan(float(half(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(float(bfloat16(1.0f + 1.0f / 256)) == 1.0f);
  CHECK(float(bfloat16(3.0f)) == 3.0f);
  CHECK(std::isnan(float(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("the caching allocator counts, caches and gives back") {
  auto be = create_backend("reference");
  const std::size_t mib = 1 << 20;
  {
    Buffer a(*be, DType::f32, mib / 4);
    const MemoryStats s = be->memory_stats();
    CHECK(s.bytes_in_use >= mib);
    CHECK(s.allocations == 1);
    CHECK(s.cache_hits == 0);
  }
  MemoryStats s = be->memory_stats();
  CHECK(s.bytes_in_use == 0);
  CHECK(s.bytes_reserved >= mib);  // kept for reuse
  { Buffer again(*be, DType::f32, mib / 4); }
  s = be->memory_stats();
  CHECK(s.allocations == 2);
  CHECK(s.cache_hits == 1);
  CHECK(s.peak_bytes_in_use >= mib);
  be->empty_cache();
  CHECK(be->memory_stats().bytes_reserved == 0);
}

TEST_CASE("a memory scope reports the peak inside it, and scopes nest") {
  auto be = create_backend("reference");
  Buffer outside(*be, DType::f64, 1000);
  MemoryScope outer(*be);
  {
    Buffer a(*be, DType::f32, 1 << 18), b(*be, DType::f32, 1 << 18);
    MemoryScope inner(*be);
    { Buffer c(*be, DType::f32, 1 << 16); }
    CHECK(inner.peak_bytes() >= (1 << 18));
    CHECK(inner.peak_bytes() < (1 << 19));
  }
  CHECK(outer.peak_bytes() >= (9u << 18));  // a + b + c = 2.25 MiB; `outside` does not count
  CHECK(outer.peak_bytes() < (3u << 20));
}

TEST_CASE("an allocation larger than memory raises OutOfMemory and the allocator still works") {
  Backend& be = get_backend("reference");
  const std::size_t huge = std::size_t(1) << 58;
  try {
    Buffer b(be, DType::f32, huge);
    FAIL("no OutOfMemory");
  } catch (const OutOfMemory& e) {
    CHECK(e.bytes_requested() == huge * 4);
    CHECK(e.backend() == "reference");
    CHECK(std::string(e.what()).find("asked for") != std::string::npos);
  }
  CHECK_THROWS_AS(Buffer(be, DType::f64, std::numeric_limits<std::size_t>::max() / 2), OutOfMemory);
  Buffer ok(be, DType::f32, 1000);
  fill(ok, 2.0);
  CHECK(sum(ok) == 2000.0);
}

TEST_CASE("with TANDEM_DEBUG_MEMORY=1 live buffers are listed with where they were allocated") {
  ::setenv("TANDEM_DEBUG_MEMORY", "1", 1);
  auto be = create_backend("reference");
  ::unsetenv("TANDEM_DEBUG_MEMORY");
  CHECK(be->tracks_allocations());
  CHECK(be->leak_report().empty());
  Buffer kept(*be, DType::f32, 256);
  const auto live = be->live_allocations();
  REQUIRE(live.size() == 1);
  CHECK(live[0].bytes >= 1024);
  CHECK(live[0].file.find("test_memory.cpp") != std::string::npos);
  CHECK(live[0].line > 0);
  CHECK(be->leak_report().find("test_memory.cpp") != std::string::npos);
}

TEST_CASE("the op profile records each op with its shape, bytes, flops and duration") {
  Backend& be = get_backend("reference");
  const auto path = std::string("tandem-profile-test-") + std::to_string(tandem::test::seed()) + ".json";
  tandem::profile::start(path);
  CHECK(tandem::profile::enabled());
  Buffer a(be, DType::f32, 6 * 4), b(be, DType::f32, 4 * 5), c(be, DType::f32, 6 * 5);
  fill(a, 1);
  fill(b, 2);
  Matrix cm = matrix(c, 6, 5);
  matmul(matrix(a, 6, 4), matrix(b, 4, 5), cm);
  const auto host = c.to_vector<float>();
  CHECK(host[0] == 8);
  const auto records = tandem::profile::records();
  REQUIRE(records.size() == 4);  // fill, fill, matmul, download
  CHECK(records[2].name == "matmul");
  CHECK(records[2].detail == "6x5x4 f32 naive");
  CHECK(records[2].flops == 2.0 * 6 * 5 * 4);
  CHECK(records[2].bytes == (24 + 20 + 30) * 4);
  CHECK(records[2].backend == "reference");
  CHECK(records[2].duration_us >= 0);
  CHECK(records[3].name == "download");
  CHECK(records[1].start_us >= records[0].start_us);
  CHECK(tandem::profile::stop() == 4);
  CHECK(!tandem::profile::enabled());
  fill(a, 3);
  CHECK(tandem::profile::records().size() == 4);  // nothing recorded after stop
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text.find("\"traceEvents\"") != std::string::npos);
  CHECK(text.find("\"name\": \"matmul\"") != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("large copies of every alignment and odd length arrive whole, in and out of a backend") {
  // On openmp, copies past TANDEM_OPENMP_STREAM_FROM go by streaming stores in interleaved runs
  // (registered again with it at 0); elsewhere this is the plain copy.
  std::vector<std::string> names = {"reference"};
#ifdef TANDEM_TEST_HAVE_OPENMP
  names.push_back("openmp");
#endif
  for (const std::string& name : names) {
    Backend& be = get_backend(name);
    const std::size_t n = (std::size_t(1) << 18) + 13;  // 1 MiB + 13 bytes: past the parallel threshold
    std::vector<std::uint8_t> host(n + 64);
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<std::uint8_t>(i * 131 + 7);
    Buffer a(be, DType::f32, n / 4 + 32), b(be, DType::f32, n / 4 + 32);
    for (std::size_t offset : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(33)}) {
      CAPTURE(offset);
      const std::size_t bytes = n - offset;
      auto* da = static_cast<unsigned char*>(a.data()) + offset;
      auto* db = static_cast<unsigned char*>(b.data()) + (offset * 5) % 17;
      be.copy_to_device({}, da, host.data() + offset, bytes);
      be.copy_on_device({}, db, da, bytes);
      std::vector<std::uint8_t> back(bytes + 2, 0xEE);
      be.copy_to_host({}, back.data() + 1, db, bytes);
      be.synchronize({});
      CHECK(back.front() == 0xEE);
      CHECK(back.back() == 0xEE);
      CHECK(std::equal(back.begin() + 1, back.end() - 1, host.begin() + static_cast<std::ptrdiff_t>(offset)));
    }
  }
}
