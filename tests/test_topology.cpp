// The CPU topology read from sysfs, here from fake trees: sizes, sharing, cores and packages,
// and what a missing or malformed file does.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tandem/backend.hpp"
#include "tandem/errors.hpp"
#include "tandem/registry.hpp"
#include "tandem/topology.hpp"

namespace {

namespace fs = std::filesystem;

void put(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text << "\n";
}

// Two cores with two threads each; a 32 MiB L3 shared by all four (sysconf said 256 MiB on
// the VM that prompted this).
fs::path fake_tree(const std::string& name) {
  const fs::path root = fs::temp_directory_path() / ("tandem_sysfs_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(root);
  put(root / "online", "0-3");
  for (int cpu = 0; cpu < 4; ++cpu) {
    const fs::path t = root / ("cpu" + std::to_string(cpu)) / "topology";
    put(t / "core_id", std::to_string(cpu / 2));
    put(t / "physical_package_id", "0");
  }
  const struct {
    const char *level, *type, *size, *shared;
  } caches[] = {{"1", "Data", "48K", "0-1"},
                {"1", "Instruction", "32K", "0-1"},
                {"2", "Unified", "2048K", "0-1"},
                {"3", "Unified", "32768K", "0-3"}};
  for (int i = 0; i < 4; ++i) {
    const fs::path c = root / "cpu0" / "cache" / ("index" + std::to_string(i));
    put(c / "level", caches[i].level);
    put(c / "type", caches[i].type);
    put(c / "size", caches[i].size);
    put(c / "shared_cpu_list", caches[i].shared);
  }
  return root;
}

}  // namespace

TEST_CASE("topology: caches, sharing, cores and packages come from the sysfs tree") {
  const fs::path root = fake_tree("good");
  const tandem::CpuTopology t = tandem::read_cpu_topology(root.string());
  CHECK(t.logical_cpus == 4);
  CHECK(t.cores == 2);
  CHECK(t.packages == 1);
  CHECK(t.l1d_bytes == 48u << 10);
  CHECK(t.l2_bytes == 2u << 20);
  CHECK(t.l3_bytes == 32u << 20);
  REQUIRE(t.caches.size() == 4);
  CHECK(t.caches[1].type == "Instruction");
  CHECK(t.caches[2].shared_by == 2);
  CHECK(t.caches[3].shared_by == 4);
  fs::remove_all(root);
}

TEST_CASE("topology: a missing tree leaves everything unknown, a malformed file is a DataError naming it") {
  const tandem::CpuTopology none = tandem::read_cpu_topology("/nonexistent/sysfs/cpu");
  CHECK(none.logical_cpus == 0);
  CHECK(none.l3_bytes == 0);
  CHECK(none.caches.empty());
  const fs::path root = fake_tree("bad");
  put(root / "cpu0" / "cache" / "index3" / "size", "lots");
  CHECK_THROWS_WITH_AS(tandem::read_cpu_topology(root.string()), doctest::Contains("index3/size: 'lots'"),
                       tandem::DataError);
  put(root / "cpu0" / "cache" / "index3" / "size", "32M");
  put(root / "online", "0-3,x");
  CHECK_THROWS_WITH_AS(tandem::read_cpu_topology(root.string()), doctest::Contains("online: '0-3,x'"),
                       tandem::DataError);
  fs::remove_all(root);
}

TEST_CASE("topology: the CPU backends report sysfs's cache sizes, not sysconf's") {
  const tandem::CpuTopology here = tandem::read_cpu_topology();
  const tandem::DeviceProperties p = tandem::get_backend("reference").properties();
  CHECK(p.l1_cache_bytes == here.l1d_bytes);
  CHECK(p.l2_cache_bytes == here.l2_bytes);
  CHECK(p.l3_cache_bytes == here.l3_bytes);
}
