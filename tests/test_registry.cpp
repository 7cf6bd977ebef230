// Backend selection, device properties, queues and events.
#include <doctest/doctest.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "support.hpp"
#ifdef TANDEM_TEST_HAVE_OPENMP
#include <omp.h>
#endif
#include "tandem/tandem.hpp"
#include "tandem/verify.hpp"

using namespace tandem;

namespace {
std::string message_of(auto&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("every known backend is listed, with a reason when unavailable") {
  const auto list = backends();
  bool saw_reference = false, saw_cuda = false;
  for (const auto& b : list) {
    if (b.name == "reference") {
      saw_reference = true;
      CHECK(b.built);
      CHECK(b.available);
      CHECK(b.reason.empty());
    }
    if (b.name == "cuda") saw_cuda = true;
    if (!b.available) CHECK_FALSE(b.reason.empty());
  }
  CHECK(saw_reference);
  CHECK(saw_cuda);
}

TEST_CASE("selection by name, auto and TANDEM_BACKEND") {
  CHECK(get_backend("reference").name() == "reference");
  CHECK(&get_backend("reference") == &get_backend("reference:0"));
  CHECK(get_backend("auto").name() == auto_backend_name());
#ifdef TANDEM_TEST_HAVE_OPENMP
  CHECK(auto_backend_name() == "openmp");
#endif
  ::setenv("TANDEM_BACKEND", "reference", 1);
  CHECK(default_backend().name() == "reference");
  ::setenv("TANDEM_BACKEND", "nonsense", 1);
  const std::string msg = message_of([] { default_backend(); });
  CHECK(msg.find("TANDEM_BACKEND=nonsense") != std::string::npos);
  CHECK(msg.find("reference") != std::string::npos);
  ::unsetenv("TANDEM_BACKEND");
}

TEST_CASE("unknown, unbuilt and bad backend names raise BackendUnavailable with what exists") {
  CHECK_THROWS_AS(get_backend("nonsense"), BackendUnavailable);
  const std::string unknown = message_of([] { get_backend("nonsense"); });
  CHECK(unknown.find("unknown backend 'nonsense'") != std::string::npos);
  CHECK(unknown.find("reference (available)") != std::string::npos);
  CHECK(unknown.find("cuda") != std::string::npos);
  CHECK_THROWS_AS(get_backend("reference:1"), BackendUnavailable);
  CHECK(message_of([] { get_backend("reference:1"); }).find("device 1 does not exist") != std::string::npos);
  CHECK_THROWS_AS(get_backend("reference:x"), BackendUnavailable);
#ifdef TANDEM_TEST_HAVE_KOKKOS
  CHECK(get_backend("kokkos").name() == "kokkos");
  CHECK_THROWS_AS(get_backend("kokkos:1"), BackendUnavailable);  // Kokkos' default space is one device
#else
  CHECK(message_of([] { get_backend("kokkos"); }).find("TANDEM_ENABLE_KOKKOS") != std::string::npos);
#endif
#ifndef TANDEM_TEST_HAVE_CUDA
  CHECK(message_of([] { get_backend("cuda"); }).find("TANDEM_ENABLE_CUDA") != std::string::npos);
#endif
}

// Built in but without a device here (the CI machine): listed unavailable with the runtime's
// reason, and asking for it raises BackendUnavailable instead of crashing.
TEST_CASE("GPU backends built without a device say why") {
  for (const auto& b : backends()) {
    if (b.kind != BackendKind::gpu || !b.built || b.available) continue;
    const std::string platform = b.name == "cuda" ? "CUDA" : "HIP";
    CHECK(b.reason.find("no usable " + platform + " device") != std::string::npos);
    const std::string name = b.name;
    CHECK(message_of([&] { get_backend(name); }).find("cannot run here: no usable " + platform) != std::string::npos);
  }
}

TEST_CASE("each backend's kind in the list is the kind of the backend it makes") {
  // The list (cmake/TandemBackends.cmake) says it before any device is probed; the tests' host and
  // device split and the GPU kernels' provenance in tandem info follow it.
  for (const auto& b : backends()) {
    CAPTURE(b.name);
    // (kokkos is listed as cpu, what Debian's Kokkos runs on; one built for a GPU space says gpu
    // in its properties, and its host-memory tests print SKIPPED.)
    if (b.available && b.name != "kokkos") CHECK(get_backend(b.name).properties().kind == b.kind);
    if (b.name == "cuda" || b.name == "hip") CHECK(b.kind == BackendKind::gpu);
    if (b.name == "openmp" || b.name == "reference") CHECK(b.kind == BackendKind::cpu);
  }
}

TEST_CASE("the simulators are listed, sim and sim64, never chosen by auto") {
  bool sim = false, sim64 = false;
  for (const auto& b : backends()) {
    sim = sim || (b.name == "sim" && b.kind == BackendKind::simulator);
    sim64 = sim64 || (b.name == "sim64" && b.kind == BackendKind::simulator);
  }
  CHECK(sim);
  CHECK(sim64);
  CHECK(auto_backend_name().rfind("sim", 0) != 0);
#ifdef TANDEM_TEST_HAVE_SIM
  CHECK(get_backend("sim").properties().kind == BackendKind::simulator);
  CHECK(get_backend("sim").properties().simd_width == 32);
  CHECK(get_backend("sim64").properties().simd_width == 64);
#endif
}

TEST_CASE("create_backend gives an isolated instance") {
  auto a = create_backend("reference");
  CHECK(a.get() != &get_backend("reference"));
  Buffer b(*a, DType::f32, 100);
  CHECK(a->memory_stats().bytes_in_use >= 400);
}

TEST_CASE("CPU device properties come from the OS") {
  const DeviceProperties p = get_backend("reference").properties();
  CHECK_FALSE(p.name.empty());
  CHECK(p.kind == BackendKind::cpu);
  CHECK(p.memory_bytes > (std::size_t(1) << 28));
  CHECK(p.compute_units == 1);
#if defined(__x86_64__)
  bool has_avx2 = false;
  for (const auto& f : p.isa_features) has_avx2 = has_avx2 || f == "avx2";
  CHECK(has_avx2 == static_cast<bool>(__builtin_cpu_supports("avx2")));
#endif
#ifdef TANDEM_TEST_HAVE_OPENMP
  CHECK(get_backend("openmp").properties().compute_units >= 1);
#endif
}

TEST_CASE("queues and events on a CPU backend") {
  Backend& be = get_backend("reference");
  const Event a = be.record_event(Queue{});
  Buffer x(be, DType::f32, 1 << 16);
  fill(x, 1.0);
  const Event b = be.record_event(Queue{});
  CHECK(be.elapsed_ms(a, b) >= 0);
  CHECK_THROWS_AS(be.elapsed_ms(a, Event{}), InvalidArgument);
  CHECK_THROWS_AS(fill(x, 2.0, Queue{7}), InvalidArgument);
  be.synchronize(be.create_queue());
}

TEST_CASE("backend_for picks the CPU below the measured crossover and the named backend from it") {
  const std::string path = "tandem-crossover-" + std::to_string(tandem::test::seed()) + ".txt";
#ifdef TANDEM_TEST_HAVE_OPENMP
  const std::string cpu = "openmp";
#else
  const std::string cpu = "reference";
#endif
  {
    std::ofstream f(path);
    f << "# measured on this machine\nadd reference 5000\n\nmatmul nosuch 1   # a backend tandem does not have\n";
  }
  setenv("TANDEM_CROSSOVER", path.c_str(), 1);
  CHECK(crossover_for("add").backend == "reference");
  CHECK(crossover_for("add").from == 5000);
  CHECK(crossover_for("scan").backend.empty());
  CHECK(backend_for("add", 4999).name() == cpu);  // below the crossover: the CPU backend
  CHECK(backend_for("add", 5000).name() == "reference");
  CHECK(backend_for("matmul", 4096).name() == cpu);  // the named backend cannot run here
  {
    std::ofstream f(path);
    f << "add reference\n";
  }
  CHECK_THROWS_WITH_AS(crossover_for("add"), doctest::Contains("line 1: expected 'algorithm backend size'"), DataError);
  {
    std::ofstream f(path);
    f << "scan reference 5000\nadd reference 99999999999999999999999\n";  // 23 digits: past 2^64
  }
  CHECK_THROWS_WITH_AS(crossover_for("add"), doctest::Contains("line 2: the size 99999999999999999999999 is past"),
                       DataError);
  setenv("TANDEM_CROSSOVER", "/dev/zero", 1);  // a line that never ends grew without bound
  CHECK_THROWS_WITH_AS(crossover_for("add"), doctest::Contains("more than 1 MiB"), DataError);
  setenv("TANDEM_CROSSOVER", ".", 1);  // a directory read as an empty file before
  CHECK_THROWS_WITH_AS(crossover_for("add"), doctest::Contains("is a directory"), DataError);
  setenv("TANDEM_CROSSOVER", "/nonexistent/crossover.txt", 1);
  CHECK_THROWS_AS(backend_for("add", 1), DataError);
  unsetenv("TANDEM_CROSSOVER");
  CHECK(backend_for("add", 1 << 30).name() == cpu);  // no file: always the CPU
  std::remove(path.c_str());
}

// openmp's kernels (elementwise, reductions, scans, softmax) and its matmul micro-kernel are the
// widest ISA this CPU has, or the one TANDEM_CPU_ISA caps them at (CTest runs this once per ISA;
// a cap this CPU cannot run is SKIPPED: the run would test another ISA).
TEST_CASE("openmp's kernels are the widest ISA the CPU has, or the TANDEM_CPU_ISA cap") {
#ifndef TANDEM_TEST_HAVE_OPENMP
  std::printf("SKIPPED: this build has no openmp backend\n");
  return;
#endif
  const char* cap = std::getenv("TANDEM_CPU_ISA");
  std::string want = test::widest_isa();
  if (cap != nullptr) {
    want = cap;
    if (test::isa_rank(want) > test::isa_rank(test::widest_isa())) {
      std::printf("SKIPPED: TANDEM_CPU_ISA=%s, but this CPU has no %s\n", cap, cap);
      return;
    }
  }
  const std::vector<std::string> features = create_backend("openmp")->properties().isa_features;
  for (const std::string kind : {"microkernel:", "kernels:"}) {
    const bool found = std::find(features.begin(), features.end(), kind + want) != features.end();
    CHECK_MESSAGE(found, kind, " is not ", want, (cap != nullptr ? " (TANDEM_CPU_ISA caps it there)" : ""));
  }
}

// openmp's tensor_core tier is bf16 on AMX tiles where the CPU has AMX-BF16 (and the OS and Linux
// let the process use it) and TANDEM_CPU_ISA does not cap below amx, else on AVX512-BF16 where the
// CPU has that and the cap allows avx512; never for other types. Where it is offered the matrix
// verifies it like every tier (openmp:matmul), and the test below runs it on large products.
TEST_CASE("openmp's tensor_core tier is bf16 on AMX or AVX512-BF16, where the CPU has it and TANDEM_CPU_ISA allows it") {
#ifndef TANDEM_TEST_HAVE_OPENMP
  std::printf("SKIPPED: this build has no openmp backend\n");
  return;
#else
  const auto be = create_backend("openmp");
  const auto offers = [&](DType t) {
    const auto tiers = be->matmul_tiers(t);
    return std::find(tiers.begin(), tiers.end(), MatmulTier::tensor_core) != tiers.end();
  };
  CHECK_FALSE(offers(DType::f32));
  CHECK_FALSE(offers(DType::f64));
  std::string line;
  for (const auto& [key, value] : be->properties().tuning) {
    if (key == "tensor_core tier") line = value;
  }
  const std::string cap = std::getenv("TANDEM_CPU_ISA") ? std::getenv("TANDEM_CPU_ISA") : "amx";
  bool amx = false, avx512bf16 = false;
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  amx = __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && (d & (1u << 22)) != 0 && (d & (1u << 24)) != 0;
  avx512bf16 = __get_cpuid_count(7, 1, &a, &b, &c, &d) != 0 && (a & (1u << 5)) != 0 && __builtin_cpu_supports("avx512f");
#endif
  const bool amx_allowed = amx && cap == "amx", bf16_allowed = avx512bf16 && (cap == "amx" || cap == "avx512");
  if (amx_allowed && line.rfind("bf16 on AMX", 0) != 0) {
    std::printf("SKIPPED: AMX-BF16 present but not usable here: %s\n", line.c_str());
    return;
  }
  const char* expected = amx_allowed ? "bf16 on AMX tiles" : bf16_allowed ? "bf16 on AVX512-BF16" : "none: ";
  CHECK_MESSAGE(line.rfind(expected, 0) == 0, "tandem info says: ", line, "; expected ", expected);
  CHECK(offers(DType::bf16) == (amx_allowed || bf16_allowed));
  if (!amx && !avx512bf16) std::printf("SKIPPED: this CPU has neither AMX-BF16 nor AVX512-BF16 (%s)\n", line.c_str());
#endif
}

// The automatic tier for bf16 follows the crossover tandem info reports (measured per CPU: the
// tensor_core tier from the product size where it beat the widening register_blocked tier, or
// never), and never picks tensor_core for f32.
TEST_CASE("openmp's automatic tier takes the tensor_core tier for bf16 from the size tandem info reports") {
#ifndef TANDEM_TEST_HAVE_OPENMP
  std::printf("SKIPPED: this build has no openmp backend\n");
#else
  const auto be = create_backend("openmp");
  std::string from, chosen_by, engine;
  for (const auto& [key, value] : be->properties().tuning) {
    if (key == "tensor_core tier") engine = value;
    if (key == "tensor_core automatic from") from = value;
    if (key == "tensor_core automatic chosen by") chosen_by = value;
  }
  // Without a measurement: AMX from 64^3, AVX512-BF16 never.
  if (chosen_by.rfind("table", 0) == 0) {
    CHECK_MESSAGE(from.rfind(engine.rfind("bf16 on AMX", 0) == 0 ? "64^3 multiply-adds" : "never", 0) == 0, from);
  }
  const auto tier = [&](DType t, std::int64_t e) {
    GemmArgs g{};
    g.m = g.n = g.k = e;
    g.ab_type = t;
    g.c_type = DType::f32;
    return be->choose_matmul_tier(g);
  };
  CHECK(tier(DType::f32, 1024) == MatmulTier::register_blocked);
  if (from.empty()) {
    std::printf("SKIPPED: no tensor_core tier on this CPU under this TANDEM_CPU_ISA\n");
    return;
  }
  if (from.rfind("never", 0) == 0) {
    CHECK(tier(DType::bf16, 2048) == MatmulTier::register_blocked);
    return;
  }
  const auto caret = from.find("^3 multiply-adds");
  REQUIRE_MESSAGE(caret != std::string::npos, from);
  const std::int64_t edge = std::stoll(from.substr(0, caret));
  CHECK_MESSAGE(tier(DType::bf16, edge) == MatmulTier::tensor_core, from);
  CHECK_MESSAGE(tier(DType::bf16, 4 * edge) == MatmulTier::tensor_core, from);
  CHECK_MESSAGE(tier(DType::bf16, edge - 1) == MatmulTier::register_blocked, from);
#endif
}

#ifdef TANDEM_TEST_HAVE_OPENMP
// The openmp backend where it offers the tensor_core tier for bf16 (this CPU's engine under this
// TANDEM_CPU_ISA); else nullptr, having printed SKIPPED with the reason.
Backend* openmp_with_tensor_tier() {
  Backend& be = get_backend("openmp");
  const auto tiers = be.matmul_tiers(DType::bf16);
  if (std::find(tiers.begin(), tiers.end(), MatmulTier::tensor_core) == tiers.end()) {
    std::printf("SKIPPED: no tensor_core tier on this CPU under this TANDEM_CPU_ISA\n");
    return nullptr;
  }
  return &be;
}

// Operands of small integers in [-3, 3] for op(A) (m x k) and op(B) (k x n), stored as ta and tb
// say (ar x ac and br x bc, rows packed), and their product in double, m x n: every sum is exact
// in f32 too, so a tier's result must equal it.
struct SmallIntegerProduct {
  std::int64_t ar, ac, br, bc;
  std::vector<float> a, b;
  std::vector<double> ab;
};
SmallIntegerProduct small_integer_product(std::mt19937& rng, std::int64_t m, std::int64_t n, std::int64_t k,
                                          Transpose ta = Transpose::no, Transpose tb = Transpose::no) {
  std::uniform_int_distribution<int> u(-3, 3);
  SmallIntegerProduct p{ta == Transpose::no ? m : k, ta == Transpose::no ? k : m, tb == Transpose::no ? k : n,
                        tb == Transpose::no ? n : k, {}, {}, std::vector<double>(static_cast<std::size_t>(m * n), 0.0)};
  p.a.resize(static_cast<std::size_t>(p.ar * p.ac));
  p.b.resize(static_cast<std::size_t>(p.br * p.bc));
  for (auto& x : p.a) x = float(u(rng));
  for (auto& x : p.b) x = float(u(rng));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t q = 0; q < k; ++q) {
      const double x = ta == Transpose::no ? p.a[std::size_t(i * p.ac + q)] : p.a[std::size_t(q * p.ac + i)];
      for (std::int64_t j = 0; j < n; ++j) {
        p.ab[std::size_t(i * n + j)] +=
            x * (tb == Transpose::no ? p.b[std::size_t(q * p.bc + j)] : p.b[std::size_t(j * p.bc + q)]);
      }
    }
  }
  return p;
}
#endif

// The tensor_core tier on products of several K chunks and of fewer than 32 K, odd K, partial
// blocks on every edge, transposes, alpha 1 (the AMX engine's full blocks stored from the tiles)
// and other alphas, beta, and a C with padded rows, against the oracle's matmul bound
// (verify::check_matmul), on whichever engine TANDEM_CPU_ISA leaves (the CTest runs it capped at
// amx and at avx512).
TEST_CASE("openmp's tensor_core tier on large bf16 products is within the oracle's bound") {
#ifndef TANDEM_TEST_HAVE_OPENMP
  std::printf("SKIPPED: this build has no openmp backend\n");
#else
  Backend* const tensor_tier = openmp_with_tensor_tier();
  if (tensor_tier == nullptr) return;
  Backend& be = *tensor_tier;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  auto random_bf16 = [&](std::int64_t n) {
    std::vector<bfloat16> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = bfloat16(u(rng));
    return Buffer::from(be, v);
  };
  struct Shape {
    std::int64_t m, n, k;
    Transpose ta, tb;
    double alpha;  // 1 (and beta 0): the AMX engine stores full blocks of C straight from its tiles
  };
  for (const Shape s : {Shape{77, 131, 1000, Transpose::no, Transpose::no, -0.75},
                        Shape{64, 64, 2048, Transpose::yes, Transpose::no, -0.75},
                        Shape{33, 300, 517, Transpose::no, Transpose::yes, -0.75},
                        Shape{100, 96, 1030, Transpose::no, Transpose::no, 1}, Shape{64, 150, 700, Transpose::yes, Transpose::yes, 1},
                        Shape{96, 64, 517, Transpose::no, Transpose::no, 1}, Shape{64, 64, 17, Transpose::no, Transpose::no, 1},
                        Shape{33, 70, 2500, Transpose::no, Transpose::no, -0.75}}) {
    const std::int64_t ar = s.ta == Transpose::no ? s.m : s.k, ac = s.ta == Transpose::no ? s.k : s.m;
    const std::int64_t br = s.tb == Transpose::no ? s.k : s.n, bc = s.tb == Transpose::no ? s.n : s.k;
    const Matrix a = matrix(random_bf16(ar * ac), ar, ac), b = matrix(random_bf16(br * bc), br, bc);
    const MatmulOptions o{.trans_a = s.ta, .trans_b = s.tb, .alpha = s.alpha, .tier = MatmulTier::tensor_core};
    const Matrix c = matmul(a, b, o);
    const verify::Comparison r = verify::check_matmul(a, b, c, o);
    CHECK_MESSAGE(r.ok(), s.m, "x", s.n, "x", s.k, ": ", r.describe());
    // beta: C = alpha AB + beta C0, against alpha AB + beta C0 computed from the checked product.
    std::vector<float> c0(static_cast<std::size_t>(s.m * s.n));
    for (auto& x : c0) x = u(rng);
    Buffer both = Buffer::from(be, c0);
    MatmulOptions ob = o;
    ob.beta = 0.5;
    matmul(a, b, matrix(both, s.m, s.n), ob);
    const std::vector<float> got = both.to_vector<float>(), ab = c.buffer.to_vector<float>();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double want = double(ab[i]) + 0.5 * double(c0[i]);
      wrong += std::fabs(got[i] - want) > 1e-5 * (std::fabs(want) + 1);
    }
    CHECK_MESSAGE(wrong == 0, wrong, " elements of alpha AB + beta C differ");
    // Into a C whose rows are 40 floats further apart than its columns: the same values, and the
    // floats between the rows left as they were.
    const std::int64_t ldc = s.n + 40;
    std::vector<float> padded(static_cast<std::size_t>(s.m * ldc), 12345.0f);
    Buffer wide = Buffer::from(be, padded);
    matmul(a, b, matrix(wide, s.m, s.n, ldc), o);
    const std::vector<float> out = wide.to_vector<float>();
    std::size_t moved = 0;
    for (std::int64_t i = 0; i < s.m; ++i) {
      for (std::int64_t j = 0; j < ldc; ++j) {
        const float want = j < s.n ? ab[static_cast<std::size_t>(i * s.n + j)] : 12345.0f;
        moved += out[static_cast<std::size_t>(i * ldc + j)] != want;
      }
    }
    CHECK_MESSAGE(moved == 0, moved, " elements of C with ldc ", ldc, " differ from the packed C or were written past n");
  }
#endif
}

// The tensor_core tier deals each thread a rectangle of the blocks and covers it with tasks of at
// most the caches' side: products with more panels than that side along one edge or both, and with
// fewer panels than threads, on the whole team and on one thread (the CTest runs it again on 3 and
// on 6 threads), with K long enough for several chunks (the accumulators kept between them: AMX
// takes chunks of a few steps of 32, AVX512-BF16 of 64). Small
// integers make every sum exact in f32: each element must equal the sum computed here in double,
// so a block computed twice (C0 + 2AB with beta 1) or never (NaN with beta 0) shows. 256 x 1024
// x 384 and 128 x 256 x 2112 (two chunks) are whole panels and steps: each thread of a one-row
// grid packs its own B panels, group by group, on the AVX512-BF16 engine.
TEST_CASE("openmp's tensor_core tier gives every block to one thread, on any team") {
#ifndef TANDEM_TEST_HAVE_OPENMP
  std::printf("SKIPPED: this build has no openmp backend\n");
#else
  Backend* const tensor_tier = openmp_with_tensor_tier();
  if (tensor_tier == nullptr) return;
  Backend& be = *tensor_tier;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> u(-3, 3);
  struct Shape {
    std::int64_t m, n, k;
  };
  const int team = omp_get_max_threads();
  for (const int threads : {team, 1}) {
    omp_set_num_threads(threads);
    for (const Shape s : {Shape{1000, 70, 400}, Shape{70, 1100, 400}, Shape{420, 400, 417}, Shape{608, 20, 400},
                          Shape{40, 33, 400}, Shape{300, 200, 2100}, Shape{256, 1024, 384},
                          Shape{128, 256, 2112}}) {
      const SmallIntegerProduct prod = small_integer_product(rng, s.m, s.n, s.k);
      const std::vector<double>& ab = prod.ab;
      std::vector<float> c0(static_cast<std::size_t>(s.m * s.n));
      for (auto& x : c0) x = float(u(rng));
      std::vector<bfloat16> a16(prod.a.begin(), prod.a.end()), b16(prod.b.begin(), prod.b.end());
      const Matrix a = matrix(Buffer::from(be, a16), s.m, s.k), b = matrix(Buffer::from(be, b16), s.k, s.n);
      // beta 0 into NaN (a block never written stays NaN; AMX stores full blocks from its tiles),
      // beta 1 into C0 (a block computed twice is C0 + 2AB).
      for (const double beta : {0.0, 1.0}) {
        Buffer c = Buffer::from(be, beta == 0 ? std::vector<float>(c0.size(), std::nanf("")) : c0);
        matmul(a, b, matrix(c, s.m, s.n), {.beta = beta, .tier = MatmulTier::tensor_core});
        const std::vector<float> got = c.to_vector<float>();
        std::size_t wrong = 0;
        for (std::size_t e = 0; e < got.size(); ++e) wrong += got[e] != ab[e] + beta * c0[e];
        CHECK_MESSAGE(wrong == 0, s.m, "x", s.n, "x", s.k, " beta ", beta, " on ", threads, " thread(s): ", wrong,
                      " elements differ");
      }
    }
  }
  omp_set_num_threads(team);
#endif
}

// The AVX512-BF16 engine reads A's full row panels in place when op(A) = A and K is whole steps
// of 32, and packs the rest (an edge panel, a partial step, A transposed): A with padded rows
// whose padding is NaN (a read past K would poison C), over full and edge panels, K of one step
// and of several chunks (64 steps a chunk on AVX512-BF16), B either way, against the exact product
// (small integers: every sum is exact in f32). The AMX engine packs A always; it runs this too
// where the CPU has it.
TEST_CASE("openmp's tensor_core tier reads A in place where it can, with any row stride") {
#ifndef TANDEM_TEST_HAVE_OPENMP
  std::printf("SKIPPED: this build has no openmp backend\n");
#else
  Backend* const tensor_tier = openmp_with_tensor_tier();
  if (tensor_tier == nullptr) return;
  Backend& be = *tensor_tier;
  std::mt19937 rng(13);
  struct Shape {
    std::int64_t m, n, k;
    Transpose ta, tb;
  };
  for (const Shape s : {Shape{77, 131, 1024, Transpose::no, Transpose::no}, Shape{96, 100, 512, Transpose::no, Transpose::yes},
                        Shape{64, 64, 32, Transpose::no, Transpose::no}, Shape{40, 33, 96, Transpose::yes, Transpose::no},
                        Shape{70, 64, 100, Transpose::no, Transpose::no}, Shape{40, 70, 4160, Transpose::no, Transpose::no},
                        Shape{50, 33, 2100, Transpose::no, Transpose::yes}}) {
    // op(A) = A: m x k (rows of k); A^T: k x m. Stored with 24 NaN past each row, or none.
    const SmallIntegerProduct prod = small_integer_product(rng, s.m, s.n, s.k, s.ta, s.tb);
    const std::int64_t ar = prod.ar, ac = prod.ac;
    std::vector<bfloat16> b16(prod.b.begin(), prod.b.end());
    const Matrix b = matrix(Buffer::from(be, b16), prod.br, prod.bc);
    for (const std::int64_t pad : {0, 24}) {
      const std::int64_t lda = ac + pad;
      std::vector<bfloat16> a16(static_cast<std::size_t>(ar * lda), bfloat16(std::nanf("")));
      for (std::int64_t r = 0; r < ar; ++r) {
        for (std::int64_t q = 0; q < ac; ++q) a16[std::size_t(r * lda + q)] = bfloat16(prod.a[std::size_t(r * ac + q)]);
      }
      const Matrix a = matrix(Buffer::from(be, a16), ar, ac, lda);
      const Matrix c = matmul(a, b, {.trans_a = s.ta, .trans_b = s.tb, .tier = MatmulTier::tensor_core});
      const std::vector<float> got = c.buffer.to_vector<float>();
      std::size_t wrong = 0;
      for (std::size_t e = 0; e < got.size(); ++e) wrong += got[e] != prod.ab[e];
      CHECK_MESSAGE(wrong == 0, s.m, "x", s.n, "x", s.k, " lda ", lda, std::string(s.ta == Transpose::yes ? " A^T" : ""),
                    std::string(s.tb == Transpose::yes ? " B^T" : ""), ": ", wrong, " elements differ");
    }
  }
#endif
}

// openmp sizes its team per op (fewer threads while other programs want the cores), on the
// calling thread's OpenMP setting; the caller's own setting must be back after the op, and
// tandem info must say the team and the wait policy in force.
TEST_CASE("openmp: an op leaves the caller's OpenMP thread setting as it was, and info shows the team and wait policy") {
#ifndef TANDEM_TEST_HAVE_OPENMP
  std::printf("SKIPPED: this build has no openmp backend\n");
#else
  Backend& be = get_backend("openmp");
  const int before = omp_get_max_threads();
  omp_set_num_threads(before + 3);  // the caller's own setting, which no team size equals
  Buffer x = Buffer::from(be, std::vector<float>(std::size_t(1) << 16, 1.0f)), r(be, DType::f32, 1);
  reduce(ReduceOp::sum, x, r);
  CHECK(r.to_vector<float>()[0] == 65536.0f);
  CHECK(omp_get_max_threads() == before + 3);
  omp_set_num_threads(before);
  std::string threads, wait;
  for (const auto& [key, value] : be.properties().tuning) {
    if (key == "threads") threads = value;
    if (key == "wait policy") wait = value;
  }
  CHECK_MESSAGE(threads.find(" of " + std::to_string(before) + " thread") != std::string::npos, threads);
  if (std::getenv("OMP_NUM_THREADS") != nullptr) CHECK(threads.find("fixed") != std::string::npos);
  CHECK(!wait.empty());
  if (const char* policy = std::getenv("OMP_WAIT_POLICY")) CHECK(wait.find(policy) != std::string::npos);
#endif
}

// The vendor tier's line in `tandem info`: the library and the kernels it chose, and a warning where
// those kernels are for an older ISA than the CPU has (an OpenBLAS that predates the CPU model
// runs its SSE3 Prescott kernels on an AVX-512 Xeon). The forced core is checked in openmp.cmake.
TEST_CASE("openmp: the vendor tier names its library and kernels, and says when they are older than the CPU") {
#ifndef TANDEM_TEST_HAVE_OPENMP
  std::printf("SKIPPED: built without the openmp backend\n");
#else
  Backend& be = get_backend("openmp");
  std::string vendor;
  for (const auto& [key, value] : be.properties().tuning) {
    if (key == "vendor tier") vendor = value;
  }
  const auto tiers = be.matmul_tiers(DType::f32);
  if (std::find(tiers.begin(), tiers.end(), MatmulTier::vendor) == tiers.end()) {
    CHECK_MESSAGE(vendor.rfind("none:", 0) == 0, vendor);
    return;
  }
  if (vendor.rfind("OpenBLAS", 0) != 0) {
    CHECK_MESSAGE(vendor.find("not OpenBLAS") != std::string::npos, vendor);
    return;
  }
  CHECK_MESSAGE(vendor.find(" kernels (") != std::string::npos, vendor);
  // It says how OpenBLAS runs its threads, and a pthreads pool (which spins beside tandem's team)
  // comes with the fix.
  const bool threading = vendor.find("; OpenMP build") != std::string::npos ||
                         vendor.find("; sequential build") != std::string::npos ||
                         vendor.find("; pthreads build") != std::string::npos;
  CHECK_MESSAGE(threading, vendor);
  if (vendor.find("; pthreads build") != std::string::npos) {
    CHECK_MESSAGE(vendor.find("libopenblas-openmp-dev") != std::string::npos, vendor);
  }
#if defined(__x86_64__)
  // The warning is there exactly when the kernels' ISA ranks below the CPU's.
  const auto rank = [](const std::string& isa) {
    for (int r = 3; r > 0; --r) {
      if (isa.rfind(r == 3 ? "AVX-512" : r == 2 ? "AVX2" : "AVX", 0) == 0) return r;
    }
    return 0;
  };
  const int kernels = rank(vendor.substr(vendor.find(" kernels (") + 10));
  const int cpu = __builtin_cpu_supports("avx512f") ? 3 : __builtin_cpu_supports("avx2") ? 2 : __builtin_cpu_supports("avx") ? 1 : 0;
  CHECK_MESSAGE((kernels < cpu) == (vendor.find("older than this CPU's") != std::string::npos), vendor);
#endif
#endif
}
