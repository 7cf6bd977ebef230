#include "openmp_backend.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <omp.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <string_view>

#include "../../core/factories.hpp"
#include "../host/cpu_info.hpp"
#include "amx.hpp"
#include "kernels.hpp"
#include "microkernel.hpp"
#include "placement.hpp"
#include "tandem/environment.hpp"
#include "tandem/topology.hpp"

namespace tandem::openmp {

namespace {

// Streaming stores and interleaved runs pay once the bytes an op moves (inputs and output) pass
// the last-level cache, where its output cannot stay cached anyway (32 MiB where the OS does not
// say its size). TANDEM_OPENMP_STREAM_FROM=BYTES moves the threshold (the tests use it to run
// those paths at small sizes); "off" never takes them.
std::size_t stream_from_bytes_setting() {
  if (const auto bytes = env::stream_from()) return *bytes == UINT64_MAX ? SIZE_MAX : std::size_t(*bytes);
  const CpuTopology& cpu = cpu_topology();  // sysfs: the size of one last-level cache
  const std::size_t last_level = cpu.l3_bytes ? cpu.l3_bytes : cpu.l2_bytes;
  return last_level ? last_level : std::size_t(32) << 20;
}

}  // namespace

bool isa_allowed(std::string_view isa) {
  static const std::string cap = [] {
    return env::choice("TANDEM_CPU_ISA", {"generic", "avx2", "avx512", "amx"}, "amx");
  }();
#ifdef TANDEM_X86_KERNELS
  if (isa == "amx") return cap == "amx" && amx_bf16();
#endif
  if (isa == "avx512") return (cap == "amx" || cap == "avx512") && host::cpu_has_avx512f();
  if (isa == "avx2") return (cap == "amx" || cap == "avx512" || cap == "avx2") && host::cpu_has_avx2_fma();
  return isa == "generic";
}

namespace {

// The tensor_core tier's engine under TANDEM_CPU_ISA: AMX tiles where the amx level is allowed,
// else AVX512-BF16 where the CPU has it and the avx512 level is allowed; none (why says) otherwise.
std::optional<Bf16Engine> bf16_engine(std::string* why = nullptr) {
  std::string reason = "this build has no x86-64 kernels";
#ifdef TANDEM_X86_KERNELS
  if (isa_allowed("amx")) return Bf16Engine::amx;
  if (isa_allowed("avx512") && host::cpu_has_avx512bf16()) return Bf16Engine::avx512bf16;
  if (amx_bf16(&reason) || host::cpu_has_avx512bf16()) {
    reason = "TANDEM_CPU_ISA caps the kernels below amx and avx512";
  } else {
    reason += "; and no AVX512-BF16";
  }
#endif
  if (why) *why = reason;
  return std::nullopt;
}

// The bf16 tensor tier's crossover with the widening register_blocked tier, for the engine in
// force: products of 64^3 to 512^3 timed both ways. The table (no measurement): AMX from 64^3,
// where its tiles matched register_blocked on the first AMX CPU measured; AVX512-BF16 never
// (0.55x register_blocked on that CPU; about 2x from 64^3 on a Zen 5 EPYC: it depends on the CPU,
// and a table cannot know which, so the table keeps the tier that is never slower).
Crossover resolve_bf16_tensor() {
  const auto engine = bf16_engine();
  if (!engine) return {kNever, "no tensor_core tier here", ""};
#ifdef TANDEM_X86_KERNELS
  const bool amx = *engine == Bf16Engine::amx;
  // The operands are made at the first product, so that a cached result costs no allocation.
  constexpr std::int64_t kMax = 512;
  std::vector<bfloat16> a, b;
  std::vector<float> c;
  // The widening tier's time depends on which of its products run on the team: a new team
  // threshold is a new measurement.
  return resolve_crossover(
      {"bf16-tensor",
       {{"engine", amx ? "amx" : "avx512bf16"}, {"team from", std::to_string(matmul_parallel_tuning().from)}},
       {64, 96, 128, 192, 256, 384, 512},
       amx ? std::int64_t(1) << 18 : kNever,
       "bf16: the tensor_core tier's time over register_blocked's"},
      [&](std::int64_t e, bool tensor) {
        if (c.empty()) {
          a.assign(kMax * kMax, bfloat16(0.5f));
          b.assign(kMax * kMax, bfloat16(0.25f));
          c.assign(kMax * kMax, 0.0f);
        }
        GemmArgs g{};
        g.m = g.n = g.k = g.lda = g.ldb = g.ldc = e;
        g.ab_type = DType::bf16;
        g.c_type = DType::f32;
        g.a = a.data();
        g.b = b.data();
        g.c = c.data();
        g.alpha = 1.0;
        if (tensor) {
          matmul_amx_bf16(g, *engine);
        } else {
          matmul_register_blocked(g);
        }
      });
#else
  return {kNever, "no tensor_core tier here", ""};
#endif
}

std::string crossover_text(const Crossover& c) {
  if (c.from == kNever) return "never";
  const auto edge = static_cast<long long>(std::llround(std::cbrt(static_cast<double>(c.from))));
  return edge * edge * edge == c.from ? std::to_string(edge) + "^3 multiply-adds"
                                      : std::to_string(c.from) + " multiply-adds";
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The CPU time of the calling thread; 0 where the clock is missing (a check then costs nothing,
// and the checks come every 20 ms, or 4 ms to confirm a shrink).
std::int64_t thread_cpu_ns() {
  timespec ts{};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return std::int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The machine's runnable tasks now (the fourth field of /proc/loadavg, "running/total"), this
// process's included; 0 when unknown.
int runnable_tasks() {
  const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[128] = {};
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return 0;
  int running = 0;
  double l1 = 0, l5 = 0, l15 = 0;
  return std::sscanf(text, "%lf %lf %lf %d/", &l1, &l5, &l15, &running) == 4 ? running : 0;
}

// This process's threads that are running or runnable now (state R in /proc/self/task/*/stat).
int own_runnable_threads() {
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return 1;
  int running = 0;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const std::string path = std::string("/proc/self/task/") + e->d_name + "/stat";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char text[512] = {};
    const ssize_t n = ::read(fd, text, sizeof text - 1);
    ::close(fd);
    const char* paren = n > 0 ? std::strrchr(text, ')') : nullptr;  // the name may hold spaces
    if (paren != nullptr && paren[1] == ' ' && paren[2] == 'R') ++running;
  }
  ::closedir(dir);
  return std::max(running, 1);
}

}  // namespace

Team::Team(int threads)
    : threads_(std::max(threads, 1)),
      fixed_(std::getenv("OMP_NUM_THREADS") != nullptr || threads <= 1),
      size_(threads_),
      last_want_(threads_) {}

int Team::size() {
  const std::int64_t now = now_ns();
  if (!fixed_ && now >= next_check_ns_.load(std::memory_order_relaxed) && !checking_.exchange(true)) {
    // Another thread may have checked between the load and the exchange: a second check now
    // would count one look at the machine as two in a row.
    if (now < next_check_ns_.load(std::memory_order_relaxed)) {
      checking_.store(false);
      return size_.load(std::memory_order_relaxed);
    }
    const std::int64_t cpu_before = thread_cpu_ns();
    const bool shrink_pending = check();
    // The check's cost in this thread's CPU time, not the clock's: on a busy machine, where the
    // checks matter, a check preempted for a time slice took 3.3 ms by the clock, which put the
    // next one 0.7 s away.
    const std::int64_t cost = thread_cpu_ns() - cpu_before;
    // Every 20 ms, or 200 checks' cost where a check costs more (one stat file per thread: about
    // 36 us with four threads on a 2-vCPU EPYC, 170-300 us in a Python process), so that checking
    // costs at most half a percent. A check that saw other programs' tasks is confirmed sooner,
    // after 4 ms or 20 checks' cost: until then the whole team runs on cores that are not free (a
    // team of two beside two busy processes took 8 ms for an add of 1M elements).
    const std::int64_t every =
        shrink_pending ? std::max<std::int64_t>(4'000'000, 20 * cost) : std::max<std::int64_t>(20'000'000, 200 * cost);
    next_check_ns_.store(now + every, std::memory_order_relaxed);
    checking_.store(false);
  }
  return size_.load(std::memory_order_relaxed);
}

bool Team::check() {
  // Other programs' runnable tasks: the machine's less this process's own. The team gives them
  // their cores when two checks in a row saw them (a task runnable for a moment, a kernel worker
  // or a shell, does not shrink it: shrinking on one check, quiet 1024^3 matmuls ran at 336-465
  // GFLOP/s median against 482-492 with the team fixed), and takes them back at the first check
  // that sees them free.
  // This process's runnable threads are read before and after the machine's: a team thread that
  // goes to sleep between the two reads would otherwise count as another program's.
  const int cores = std::max(omp_get_num_procs(), 1);
  // The calling thread is one of the machine's runnable tasks, so at most machine - 1 are other
  // programs'. Where that many leave the whole team its cores (a quiet machine), this process's
  // threads need not be counted: two /proc reads per thread, 0.14 ms a check in a Python process
  // with PyTorch loaded on a 2-vCPU Zen 4 EPYC (a 1K-element op after a pause took 0.19 ms
  // against 0.05 with the team fixed).
  if (const int first = runnable_tasks(); first > 0 && cores - (first - 1) >= threads_) {
    last_want_.store(threads_);
    size_.store(threads_);
    return false;  // the team is whole: no shrink to confirm
  }
  const int own_before = own_runnable_threads();
  const int machine = runnable_tasks();
  const int others = std::max(0, machine - std::max(own_before, own_runnable_threads()));
  const int want = std::clamp(cores - others, 1, threads_);
  const int before = last_want_.exchange(want);
  size_.store(std::max(want, before));  // the larger of the last two: shrink on two in a row
  return want < before;
}

std::string Team::describe() const {
  std::string text = std::to_string(size_.load()) + " of " + std::to_string(threads_) + " thread(s)";
  if (fixed_) return text + (threads_ > 1 ? " (OMP_NUM_THREADS: fixed)" : "");
  return text + " (fewer while other programs' runnable tasks want the cores: checked every 20 ms)";
}

TeamScope::TeamScope(Team& team) {
  before_ = omp_get_max_threads();
  if (omp_in_parallel()) return;  // inside a region of the caller's: its own setting applies
  // At most the caller's own setting: omp_set_num_threads(1) before an op runs it on one thread.
  const int want = std::min(team.size(), before_);
  keep_team_off_caller_cpu(want);  // first: it may throw (a bad TANDEM_OPENMP_PLACEMENT)
  if (want != before_) {
    omp_set_num_threads(want);
    set_ = true;
  }
}

TeamScope::~TeamScope() {
  if (set_) omp_set_num_threads(before_);
}

OpenMPBackend::OpenMPBackend()
    : threads_(omp_get_max_threads()), stream_from_bytes_(stream_from_bytes_setting()), team_(threads_) {
  set_whole_team(threads_);
}

DeviceProperties OpenMPBackend::properties() const {
  DeviceProperties p = host::cpu_properties(threads_);
  p.isa_features.push_back(std::string("microkernel:") + best_microkernel_f32().isa);
  p.isa_features.push_back(std::string("kernels:").append(kernels_isa()));
  const StoreTuning& t = store_tuning();
  const std::size_t from = stream_from_bytes_;
  const std::string when = from == SIZE_MAX    ? std::string("never (TANDEM_OPENMP_STREAM_FROM=off)")
                           : from < (1u << 20) ? "for ops that move " + std::to_string(from) + " bytes or more"
                                               : "for ops that move " + std::to_string(from >> 20) + " MiB or more";
  p.tuning.push_back({"threads", team_.describe()});
  const char* wait = std::getenv("OMP_WAIT_POLICY");
  p.tuning.push_back({"wait policy", wait != nullptr ? std::string("OMP_WAIT_POLICY=") + wait
                                                     : std::string("the OpenMP runtime's default (libgomp: spin "
                                                                   "briefly, then sleep)")});
  p.tuning.push_back({"placement", placement_description()});
  const ParallelTuning& par = parallel_tuning();
  p.tuning.push_back(
      {"parallel from", std::to_string(par.from) + " elements (smaller loops run on the calling thread)"});
  p.tuning.push_back({"parallel from chosen by", par.source});
  if (!par.measured.empty()) p.tuning.push_back({"parallel from measured", par.measured});
  p.tuning.push_back({"stores", std::string(t.stream ? "streaming" : "plain") + ", " + std::to_string(t.runs) +
                                    " interleaved run(s) per thread (in place: " + std::to_string(t.update_runs) +
                                    "), " + when + (from == SIZE_MAX ? "" : " (inputs and output together)")});
  p.tuning.push_back({"stores chosen by", t.source});
  if (!t.measured.empty()) p.tuning.push_back({"stores measured", t.measured});
  p.tuning.push_back({"scan prefetch", prefetch_text(t.scan_prefetch)});
  if (!t.scan_measured.empty()) p.tuning.push_back({"scan prefetch measured", t.scan_measured});
  p.tuning.push_back({"reduction prefetch", prefetch_text(t.reduce_prefetch)});
  if (!t.reduce_measured.empty()) p.tuning.push_back({"reduction prefetch measured", t.reduce_measured});
  p.tuning.push_back(
      {"kernels", std::string(kernels_isa()) + " (elementwise, reductions, scans, softmax)" +
                      (t.narrow_sums ? "; avx2's for sum, norm2, dot and mse past the last-level cache" : "")});
  p.tuning.push_back({"micro-kernel", best_microkernel_f32().isa});
  {
    std::string why;
    const auto engine = bf16_engine(&why);
    p.tuning.push_back({"tensor_core tier", !engine                      ? "none: " + why
                                            : *engine == Bf16Engine::amx ? "bf16 on AMX tiles (tdpbf16ps)"
                                                                         : "bf16 on AVX512-BF16 (vdpbf16ps)"});
    if (engine) {
      const Crossover& bf16 = bf16_tensor_tuning();
      p.tuning.push_back({"tensor_core automatic from", bf16.from == kNever
                                                            ? "never (opt-in: MatmulTier::tensor_core)"
                                                            : crossover_text(bf16) + " (bf16 with an f32 result)"});
      p.tuning.push_back({"tensor_core automatic chosen by", bf16.source});
      if (!bf16.measured.empty()) p.tuning.push_back({"tensor_core automatic measured", bf16.measured});
    }
  }
  p.tuning.push_back({"vendor tier", vendor_description()});
  p.tuning.push_back({"gemm blocking f32", gemm_blocking_text()});
  if (!gemm_blocking_forced() && !gemm_tuning().measured.empty()) {
    p.tuning.push_back({"gemm blocking measured", gemm_tuning().measured});
  }
  const Crossover& mpar = matmul_parallel_tuning();
  p.tuning.push_back({"matmul parallel from",
                      crossover_text(mpar) + " (smaller register_blocked products run on the calling thread)"});
  p.tuning.push_back({"matmul parallel from chosen by", mpar.source});
  if (!mpar.measured.empty()) p.tuning.push_back({"matmul parallel from measured", mpar.measured});
  return p;
}

std::string_view kernels_isa() {
  static const std::string_view chosen = [] {
#ifdef TANDEM_X86_KERNELS
    if (isa_allowed("avx512")) return "avx512";
    if (isa_allowed("avx2")) return "avx2";
#endif
    return "generic";
  }();
  return chosen;
}

const CalibrationLoops& calibration_loops() {
#ifdef TANDEM_X86_KERNELS
  if (kernels_isa() == "avx512") return calibration_loops_avx512();
  if (kernels_isa() == "avx2") return calibration_loops_avx2();
#endif
  return calibration_loops_generic();
}

ReadPrefetch OpenMPBackend::reduce_prefetch(std::size_t bytes) const {
  return bytes < stream_from_bytes_ ? kReducePrefetchTable : store_tuning().reduce_prefetch;
}

bool OpenMPBackend::narrow_sums(std::size_t bytes) const {
  return bytes >= stream_from_bytes_ && store_tuning().narrow_sums;
}

std::vector<MatmulTier> OpenMPBackend::matmul_tiers(DType ab) const {
  std::vector<MatmulTier> tiers = {MatmulTier::naive, MatmulTier::tiled, MatmulTier::register_blocked};
  if (ab == DType::bf16 && bf16_engine()) tiers.push_back(MatmulTier::tensor_core);
  if (vendor_available() && (ab == DType::f32 || ab == DType::f64)) tiers.push_back(MatmulTier::vendor);
  return tiers;
}

MatmulTier OpenMPBackend::choose_matmul_tier(const GemmArgs& g) const {
  // Packing pays off once the product has some depth; tiny products go straight through.
  if (g.m * g.n * g.k < 4096) return MatmulTier::naive;
  // bf16 on the CPU's bf16 hardware from the size where it was measured to beat the widening
  // register_blocked tier on this CPU (bf16_tensor_tuning; never where it did not).
  if (g.ab_type == DType::bf16 && g.c_type == DType::f32 && bf16_engine() &&
      g.m * g.n * g.k >= bf16_tensor_tuning().from) {
    return MatmulTier::tensor_core;
  }
  return MatmulTier::register_blocked;
}

void OpenMPBackend::matmul(Queue q, const GemmArgs& g) {
  const TeamScope team = enter(q);
  try {
    switch (g.tier) {
      case MatmulTier::naive:
        matmul_naive(g);
        break;
      case MatmulTier::tiled:
        matmul_tiled(g);
        break;
      case MatmulTier::register_blocked:
        matmul_register_blocked(g);
        break;
      case MatmulTier::vendor: {
        // OpenBLAS's OpenMP build runs on the caller's thread count, and its result depends on
        // it (measured: a 96 x 80 x 40 product differs in the last bits between one thread and
        // two): on the backend's whole team (or the caller's own smaller setting), not the
        // busy-machine team, so that the same product gives the same bits.
        const ThreadsScope pinned(std::min(threads_, team.caller_threads()));
        matmul_vendor(g);
        forget_team_placement();  // OpenBLAS sizes its own regions
        break;
      }
      case MatmulTier::tensor_core: {
        std::string why;
        const auto engine = bf16_engine(&why);
#ifdef TANDEM_X86_KERNELS
        if (engine && g.ab_type == DType::bf16) {
          matmul_amx_bf16(g, *engine);
          break;
        }
#endif
        throw Unsupported("openmp: no tensor_core tier for this product: " +
                          (engine ? std::string("it takes bf16 inputs only") : why));
      }
      default:
        throw Unsupported("openmp: matmul tier '" + std::string(name_of(g.tier)) + "' is not offered");
    }
  } catch (const std::bad_alloc&) {  // packing buffers: report it as the typed error
    throw OutOfMemory(static_cast<std::size_t>((g.m + g.n) * std::min<std::int64_t>(g.k, 512)) * size_of(g.c_type),
                      device_free_bytes(), name() + " (matmul packing buffers)");
  }
}

void OpenMPBackend::host_parallel(Queue q, std::size_t n, std::size_t grain, unsigned max_threads,
                                  const std::function<void(std::size_t, std::size_t)>& body) {
  const TeamScope team = enter(q);
  if (n == 0) return;
  grain = std::max<std::size_t>(grain, 1);
  int team_size = omp_get_max_threads();
  if (max_threads != 0) team_size = std::min(team_size, static_cast<int>(max_threads));
  const auto threads = static_cast<std::size_t>(team_size);
  const std::size_t chunks = (n + grain - 1) / grain;
  const std::size_t wanted = std::min(chunks, threads * 4);  // a few per thread: uneven chunks even out
  if (wanted <= 1) {
    body(0, n);
    return;
  }
  const std::size_t step = ((n + wanted - 1) / wanted + grain - 1) / grain * grain;
  const auto pieces = static_cast<std::ptrdiff_t>((n + step - 1) / step);
  std::exception_ptr error;
  std::atomic<bool> failed{false};
#pragma omp parallel for schedule(dynamic, 1) num_threads(team_size)
  for (std::ptrdiff_t i = 0; i < pieces; ++i) {
    if (failed.load(std::memory_order_relaxed)) continue;
    const std::size_t begin = static_cast<std::size_t>(i) * step;
    try {
      body(begin, std::min(n, begin + step));
    } catch (...) {
#pragma omp critical(tandem_host_parallel)
      if (!error) error = std::current_exception();
      failed = true;
    }
  }
  if (team_size < omp_get_max_threads()) forget_team_placement();  // a smaller team may end workers
  if (error) std::rethrow_exception(error);
}

const Crossover& bf16_tensor_tuning() {
  static const Crossover tuning = [] {
    const ThreadsScope whole(whole_team());
    return resolve_bf16_tensor();
  }();
  return tuning;
}

}  // namespace tandem::openmp

namespace tandem::detail {
int openmp_device_count(std::string&) { return 1; }
std::shared_ptr<Backend> make_openmp_backend(int) {
#ifdef TANDEM_X86_KERNELS
  if (openmp::kernels_isa() == "avx512") return openmp::make_openmp_backend_avx512();
  if (openmp::kernels_isa() == "avx2") return openmp::make_openmp_backend_avx2();
#endif
  return openmp::make_openmp_backend_generic();
}
}  // namespace tandem::detail
