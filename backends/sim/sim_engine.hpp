// The simulator's engine: a pool of OS threads that run blocks, fibers for the threads of a
// block, per-block shared memory, warp exchanges, and global memory with guard zones.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "sim_plain.hpp"
#include "tandem/sim.hpp"

namespace tandem::sim {

struct EngineOptions {
  unsigned warp_size = 32;
  std::uint64_t seed = 0;
  unsigned threads = 0;  // OS threads running blocks; 0: one per hardware thread
  std::size_t shared_memory_per_block = 48 * 1024;
  std::size_t shared_memory_opt_in = 227 * 1024;  // with LaunchConfig::large_shared (an H100's limit)
  unsigned hang_seconds = 30;  // a thread spinning this long while nothing progresses: hung
  // The threads of a block run in a shuffled order each barrier round, so that a missing barrier
  // shows; false: in rank order (the host engine that runs user kernels on the CPU backends).
  bool shuffle = true;
  // The adversary (sim_adversary.cpp): one OS thread, `resident` blocks at once (0: 1 to 4, drawn
  // per launch), a launch whose threads make `watchdog` flag accesses with no progress fails as hung.
  bool adversary = false;
  unsigned resident = 0;
  std::uint64_t watchdog = std::uint64_t(1) << 20;
};

class SimEngine final : public Engine {
 public:
  explicit SimEngine(const EngineOptions& options);
  ~SimEngine() override;
  SimEngine(const SimEngine&) = delete;
  SimEngine& operator=(const SimEngine&) = delete;

  void run(const gpu::LaunchConfig& config, const std::function<void()>& thread_body) override;
  void run_adversarial(const gpu::LaunchConfig& config, const std::function<void()>& thread_body,
                       const AdversaryOptions& options) override;
  // A launch whose blocks another scheduler hands out: runner(blocks, block) must call block(i)
  // once for each i in [0, blocks), from any threads (the openmp backend's team); block() never
  // throws, the launch's first failure is rethrown after runner returns. Never adversarial.
  using BlockRunner =
      std::function<void(std::uint64_t blocks, const std::function<void(std::uint64_t linear)>& block)>;
  void run_with(const gpu::LaunchConfig& config, const std::function<void()>& thread_body, const BlockRunner& runner);
  unsigned warp_size() const override { return options_.warp_size; }
  std::uint64_t schedule_seed() const override { return options_.seed; }
  const EngineOptions& options() const { return options_; }
  unsigned threads() const { return static_cast<unsigned>(workers_.size()) + 1; }

  // Global memory: every block has a guard zone before and after it.
  void* allocate(std::size_t bytes);
  void release(void* ptr) noexcept;
  // The caching allocator hands out `requested` bytes of a block: guard the rest too.
  void set_requested(void* ptr, std::size_t requested) noexcept;
  // Throws DeviceError naming the kernel when a guard zone was written (and restores it).
  void check_guards(const char* kernel);
  // Every buffer with its guard zones, page-aligned: what the adversary watches for plain stores.
  std::vector<internal::Span> buffer_spans();

 private:
  void release_all() noexcept;  // frees every buffer still allocated (at destruction)
  void check_launch(const gpu::LaunchConfig& config) const;  // throws DeviceError for a bad grid or block
  void adversary_launch(const gpu::LaunchConfig& config, const std::function<void()>& thread_body,
                        const AdversaryOptions& options);
  void work();  // runs blocks of the current launch until none is left
  void run_one(std::uint64_t linear) noexcept;  // one block; its failure recorded for the launch
  void run_block(std::uint64_t linear);

  EngineOptions options_;
  std::mutex launch_mutex_;  // one launch at a time

  // the current launch, read by the workers
  const gpu::LaunchConfig* config_ = nullptr;
  const std::function<void()>* body_ = nullptr;
  std::uint64_t blocks_ = 0;
  std::uint64_t launch_index_ = 0;
  std::atomic<std::uint64_t> next_block_{0};
  std::atomic<bool> failed_{false};
  std::atomic<std::uint64_t> progress_{0};  // flag stores, atomics and finished blocks: the hang watch
  std::exception_ptr error_;
  std::mutex error_mutex_;

  // the worker pool
  std::vector<std::thread> workers_;
  std::mutex pool_mutex_;
  std::condition_variable wake_, done_;
  std::uint64_t generation_ = 0;
  unsigned busy_ = 0;
  bool stopping_ = false;

  struct Allocation {
    std::size_t block;      // bytes the device allocation has
    std::size_t requested;  // bytes in use (guarded beyond)
  };
  std::mutex memory_mutex_;
  std::unordered_map<unsigned char*, Allocation> allocations_;
};

}  // namespace tandem::sim
