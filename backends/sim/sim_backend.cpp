// The simulator backends "sim" (warp 32) and "sim64" (warp 64): the GPU Backend of
// backends/gpu over a runtime whose device is the engine in sim_engine.cpp. Memory is host
// memory with guard zones; queues are synchronous (every launch finishes before it returns), so
// events read the host clock.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <thread>

#include "../../core/factories.hpp"
#include "../../core/host_event.hpp"
#include "../gpu/gpu_backend.hpp"
#include "../host/cpu_info.hpp"
#include "../host/host_backend.hpp"
#include "sim_engine.hpp"
#include "tandem/environment.hpp"

namespace tandem {
namespace sim {
namespace {

// TANDEM_SIM_SEED, else TANDEM_TEST_SEED (so a test run's seed replays its thread order), else random.
std::uint64_t schedule_seed() {
  if (const auto seed = env::whole("TANDEM_SIM_SEED")) return *seed;
  if (const auto seed = env::whole("TANDEM_TEST_SEED")) return *seed;
  return (std::uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
}

class SimRuntime {
 public:
  explicit SimRuntime(const EngineOptions& options) : engine_(options) {}

  SimEngine& engine() { return engine_; }

  void* allocate(std::size_t bytes) {
    if (bytes > host::available_memory_bytes()) return nullptr;
    return engine_.allocate(bytes);
  }
  void release(void* ptr) { engine_.release(ptr); }
  // The simulator's "device" is host memory: staging memory is plain host memory too.
  void* host_allocate(std::size_t bytes, bool& pinned) {
    pinned = false;
    return ::operator new((bytes + 63) / 64 * 64, std::align_val_t(64), std::nothrow);
  }
  void host_release(void* p) noexcept { ::operator delete(p, std::align_val_t(64)); }
  void set_requested(void* ptr, std::size_t requested) noexcept { engine_.set_requested(ptr, requested); }
  // Managed memory: device memory is host memory here, so the host reads and writes it directly
  // (guarded like any device block).
  bool has_managed() const { return true; }
  MemoryPlace memory_place() const { return {}; }  // host memory
  void* managed_allocate(std::size_t bytes) {
    void* p = allocate(bytes);
    if (p != nullptr) engine_.set_requested(p, bytes);
    return p;
  }
  void managed_release(void* ptr) noexcept { engine_.release(ptr); }
  std::size_t free_bytes() const { return host::available_memory_bytes(); }

  DeviceProperties properties() const {
    DeviceProperties p = host::cpu_properties(static_cast<int>(engine_.threads()));
    p.name = "tandem GPU simulator (warp " + std::to_string(engine_.warp_size()) + ", " +
             (engine_.options().adversary ? std::string("adversary on one OS thread")
                                          : std::to_string(engine_.threads()) + " OS threads") +
             ", schedule seed " + std::to_string(engine_.schedule_seed()) + ") on " + p.name;
    p.kind = BackendKind::simulator;
    p.simd_width = static_cast<int>(engine_.warp_size());
    p.shared_memory_per_block = engine_.options().shared_memory_per_block;
    p.shared_memory_per_multiprocessor = p.shared_memory_per_block;  // one block at a time per simulated SM
    p.isa_features = {"warp" + std::to_string(engine_.warp_size())};
    return p;
  }
  // Few blocks keep the simulator fast; grid-stride loops cover any size with them.
  unsigned max_blocks() const { return 4 * engine_.threads(); }

  // Queues may be created from several threads at once (ThreadSanitizer found ++ unguarded).
  int create_stream() { return streams_.fetch_add(1) + 1; }
  int streams() const { return streams_.load() + 1; }
  void check_stream(int id) const {
    if (id < 0 || id > streams_.load()) {
      throw InvalidArgument("queue " + std::to_string(id) + " was not created by this backend (create_queue)");
    }
  }
  void synchronize(int) {}
  void copy(int, void* dst, const void* src, std::size_t bytes) { std::memmove(dst, src, bytes); }
  void memset(int, void* p, int value, std::size_t bytes) { std::memset(p, value, bytes); }
  std::shared_ptr<Event::Impl> record(int) { return std::make_shared<detail::HostEvent>(); }
  double elapsed_ms(Event::Impl* a, Event::Impl* b) { return detail::host_elapsed_ms(a, b); }

  // Kernels and copies run when they are queued: every event has passed already.
  void wait_event(int, Event::Impl* e) { (void)detail::host_event(e, "wait_event"); }
  void synchronize_event(Event::Impl* e) { (void)detail::host_event(e, "synchronize_event"); }

  template <class... P, class... A>
  void launch(int, const gpu::LaunchConfig& config, void (*kernel)(P...), A&&... args) {
    const std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
    engine_.run(config, [&] { std::apply(kernel, params); });
  }

 private:
  SimEngine engine_;
  std::atomic<int> streams_ = 0;
};

using SimBackend = gpu::GpuBackend<SimRuntime>;

// The OS threads the fiber stacks allow: each GPU thread's stack is two memory maps (the stack and
// the guard page below it), an OS thread may hold a block of 1024 GPU threads, and the kernel
// refuses maps past vm.max_map_count (65530 by default): with 1024 OS threads the stacks failed
// as std::bad_alloc in the middle of a launch. Half the limit is left for everything else.
unsigned most_threads_the_maps_allow() {
  std::uint64_t limit = 65530;
  if (std::FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
    unsigned long long v = 0;
    if (std::fscanf(f, "%llu", &v) == 1 && v > 0) limit = v;
    std::fclose(f);
  }
  return static_cast<unsigned>(std::max<std::uint64_t>(1, limit / 2 / (2 * gpu::kMaxBlockThreads)));
}

EngineOptions options_for(unsigned warp) {
  EngineOptions o;
  o.warp_size = warp;
  o.seed = schedule_seed();
  o.threads = static_cast<unsigned>(env::whole("TANDEM_SIM_THREADS", 1, 1024).value_or(0));  // 0: the default
  const unsigned most = most_threads_the_maps_allow();
  if (o.threads > most) {
    throw InvalidArgument("TANDEM_SIM_THREADS=" + std::to_string(o.threads) + ": the simulator's fiber stacks take " +
                          "two memory maps per GPU thread, up to " + std::to_string(gpu::kMaxBlockThreads) +
                          " per OS thread, and this system allows " + std::to_string(most) +
                          " OS threads within half of vm.max_map_count; give at most " + std::to_string(most));
  }
  if (o.threads == 0) o.threads = std::min(most, std::max(1u, std::thread::hardware_concurrency()));
  o.hang_seconds = static_cast<unsigned>(env::whole("TANDEM_SIM_HANG_SECONDS", 1, 86400).value_or(o.hang_seconds));
  o.adversary = env::flag("TANDEM_SIM_ADVERSARY");
  o.resident = static_cast<unsigned>(env::whole("TANDEM_SIM_RESIDENT", 1, 64).value_or(0));
  o.watchdog = env::whole("TANDEM_SIM_WATCHDOG", 1000, std::uint64_t(1) << 40).value_or(o.watchdog);
  return o;
}

}  // namespace

namespace {

// The engines that run host-compiled kernels on the host backends other than the simulator's: one
// per launch running at once (made on demand, kept for the next), so that launches from several
// host threads run side by side. Fibers for a block's threads, in rank order, without the
// simulator's checks of the order; blocks go to the backend's threads (openmp: its team).
class HostEngines {
 public:
  struct Lease {
    HostEngines& pool;
    std::unique_ptr<SimEngine> engine;
    ~Lease() {
      std::lock_guard lock(pool.mutex_);
      pool.free_.push_back(std::move(engine));
    }
  };
  Lease take() {
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        std::unique_ptr<SimEngine> e = std::move(free_.back());
        free_.pop_back();
        return Lease{*this, std::move(e)};
      }
    }
    EngineOptions o;
    o.threads = 1;  // no pool of its own
    o.shuffle = false;
    o.hang_seconds = static_cast<unsigned>(env::whole("TANDEM_SIM_HANG_SECONDS", 1, 86400).value_or(o.hang_seconds));
    return Lease{*this, std::make_unique<SimEngine>(o)};
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<SimEngine>> free_;
};

}  // namespace

void run_on_host(Backend& backend, const gpu::LaunchConfig& config, const std::function<void()>& thread_body) {
  if (auto* sim = dynamic_cast<SimBackend*>(&backend)) return sim->runtime().engine().run(config, thread_body);
  if (backend.memory_place().kind != MemoryPlace::Kind::host) {
    throw InvalidArgument("kernel '" + std::string(config.kernel) + "' was compiled for the host, and backend '" +
                          backend.name() + "' keeps its buffers in " + describe(backend.memory_place()) +
                          ": compile the kernel for it too (tandem_add_kernels ... BACKENDS, docs/kernels.md)");
  }
  static HostEngines engines;
  const HostEngines::Lease lease = engines.take();
  // Each OS thread that runs blocks keeps the fiber stacks of up to a block's 1024 threads, two
  // memory maps each: at most the threads vm.max_map_count allows (as for the simulator's pool).
  static const unsigned most = most_threads_the_maps_allow();
  lease.engine->run_with(config, thread_body, [&](std::uint64_t blocks, const std::function<void(std::uint64_t)>& block) {
    backend.host_parallel(Queue{}, static_cast<std::size_t>(blocks), 1, most, [&](std::size_t begin, std::size_t end) {
      for (std::size_t b = begin; b < end; ++b) block(b);
    });
  });
}

Engine& engine_of(Backend& backend) {
  if (auto* sim = dynamic_cast<SimBackend*>(&backend)) return sim->runtime().engine();
  throw InvalidArgument("backend '" + backend.name() + "' is not a simulator; use get_backend(\"sim\") or \"sim64\"");
}

}  // namespace sim

namespace detail {
int sim_device_count(std::string&) { return 1; }
int sim64_device_count(std::string&) { return 1; }
std::shared_ptr<Backend> make_sim_backend(int) { return make_backend<sim::SimBackend>("sim", sim::options_for(32)); }
std::shared_ptr<Backend> make_sim64_backend(int) {
  return make_backend<sim::SimBackend>("sim64", sim::options_for(64));
}
}  // namespace detail

}  // namespace tandem
