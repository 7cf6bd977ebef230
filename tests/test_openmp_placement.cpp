// Where the openmp backend's team threads run (backends/openmp/placement.hpp): after an op, each
// worker of the calling thread's team may run on every CPU the caller may, but the one the caller
// ran the op on (on every one where the team has more threads than the caller has CPUs), and on
// every one with TANDEM_OPENMP_PLACEMENT=off; again after the caller moved to another CPU. The team must be fixed (OMP_NUM_THREADS: a busy
// machine shrinks it, and one thread needs no placement): openmp.cmake runs it so, on 2 and 3
// threads and with the placement off; elsewhere it reports SKIPPED.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#if defined(TANDEM_TEST_HAVE_OPENMP) && defined(__linux__)
#include <omp.h>
#include <sched.h>

#include "tandem/tandem.hpp"
#endif

TEST_CASE("openmp keeps its team's workers off the CPU of the thread that calls the op") {
#if !defined(TANDEM_TEST_HAVE_OPENMP) || !defined(__linux__)
  std::printf("SKIPPED: needs the openmp backend on Linux\n");
#else
  using namespace tandem;
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    std::printf("SKIPPED: the team is not fixed (OMP_NUM_THREADS unset): openmp.cmake runs this with it set\n");
    return;
  }
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof(mine), &mine) != 0) {
    std::printf("SKIPPED: this thread's CPUs do not fit a cpu_set_t\n");
    return;
  }
  const int threads = omp_get_max_threads(), cpus = CPU_COUNT(&mine);
  if (threads < 2 || cpus < 2) {
    std::printf("SKIPPED: %d thread(s) on %d CPU(s): nothing to place\n", threads, cpus);
    return;
  }
  const char* setting = std::getenv("TANDEM_OPENMP_PLACEMENT");
  const bool off = setting != nullptr && std::string(setting) == "off";
  Backend& be = get_backend("openmp");
  std::string placement;
  for (const auto& [key, value] : be.properties().tuning) {
    if (key == "placement") placement = value;
  }
  if (!off && placement.rfind("off (the OpenMP runtime binds", 0) == 0) {
    std::printf("SKIPPED: %s\n", placement.c_str());
    return;
  }
  CHECK_MESSAGE((placement.rfind("off", 0) == 0) == off, placement);  // "off (why)" or what it does
  Buffer x = Buffer::from(be, std::vector<float>(std::size_t(1) << 22, 1.0f)), r(be, DType::f32, 1);
  // An op, then each worker's mask: every CPU of the caller's but the one it ran the op on (all
  // where the team outnumbers them, or with the placement off). The caller may move between the
  // op and the look at its workers: tried until it stayed put. `before` (optional) runs first.
  const auto op_then_look = [&](const char* when, const auto& before) {
    bool looked = false;
    for (int attempt = 0; attempt < 50 && !looked; ++attempt) {
      before();
      const int at = sched_getcpu();
      reduce(ReduceOp::sum, x, r);
      REQUIRE(r.to_vector<float>()[0] == float(1 << 22));
      std::vector<cpu_set_t> masks(static_cast<std::size_t>(threads));
      int after = -1, team = 0;
#pragma omp parallel num_threads(threads)
      {
        const int t = omp_get_thread_num();
        if (t == 0) {
          after = sched_getcpu();
          team = omp_get_num_threads();
        }
        CPU_ZERO(&masks[static_cast<std::size_t>(t)]);
        sched_getaffinity(0, sizeof(cpu_set_t), &masks[static_cast<std::size_t>(t)]);
      }
      if (at != after) continue;
      looked = true;
      REQUIRE(team == threads);
      cpu_set_t want = mine;
      if (!off && threads <= cpus) CPU_CLR(at, &want);
      for (int t = 1; t < threads; ++t) {
        const cpu_set_t& m = masks[static_cast<std::size_t>(t)];
        CHECK_MESSAGE(CPU_EQUAL(&m, &want), std::string(when), ": worker ", t, " of ", threads, " on ", cpus,
                      " CPUs, the caller on CPU ", at, std::string(off ? ", placement off" : ""), ": CPU ", at,
                      std::string(CPU_ISSET(at, &m) ? " allowed" : " not allowed"), ", CPUs allowed ", CPU_COUNT(&m),
                      " (want ", CPU_COUNT(&want), ")");
      }
    }
    CHECK_MESSAGE(looked, std::string(when), ": the caller moved between every op and the look at its workers");
  };
  op_then_look("an op", [] {});
  // The caller moved to another of its CPUs (pinned there for a moment, then given all of them
  // back): the next op places the workers off that one.
  op_then_look("an op after the caller moved", [&] {
    const int now = sched_getcpu();
    int other = -1;
    for (int c = 0; c < CPU_SETSIZE && other < 0; ++c) {
      if (c != now && CPU_ISSET(c, &mine)) other = c;
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(other, &one);
    REQUIRE(sched_setaffinity(0, sizeof(one), &one) == 0);
    REQUIRE(sched_setaffinity(0, sizeof(mine), &mine) == 0);
  });
#endif
}
