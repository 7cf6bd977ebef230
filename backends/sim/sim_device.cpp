// The simulator's device side: what kernel_api.hpp's functions do in a simulator build, inside
// a kernel that one of the schedulers (sim_engine.cpp, sim_adversary.cpp) runs.
#include <chrono>
#include <cstring>
#include <string>

#include "sim_internal.hpp"
#include "tandem/errors.hpp"

namespace tandem::sim {

using namespace internal;

// ---- device side ----

std::uint64_t warp_exchange(WarpOp op, std::uint64_t bits, unsigned param, const std::source_location& where) {
  Running& r = running();
  Fiber& f = *r.fiber;
  f.state = State::warp;
  f.op = op;
  f.bits = bits;
  f.param = param;
  f.where = where;
  suspend(r);
  return f.result;
}

void* static_shared_slot(const void* site, std::size_t bytes, std::size_t align) {
  Block& b = *running().block;
  for (const auto& [s, offset] : b.slots) {
    if (s == site) return b.shared.data() + offset;
  }
  align = std::max<std::size_t>(align, 16);
  const std::size_t offset = (b.shared_top + align - 1) / align * align;
  if (offset + bytes > b.shared_limit) {
    fail(b, "shared memory exhausted: " + std::to_string(offset + bytes) + " bytes needed (static and dynamic), " +
                std::to_string(b.shared_limit) + " available per block");
  }
  std::memset(b.shared.data() + offset, kSharedPoison, bytes);
  b.slots.emplace_back(site, offset);
  b.shared_top = offset + bytes;
  return b.shared.data() + offset;
}

void spin_check(const std::source_location& where) {
  Running& r = running();
  const Block& b = *r.block;
  Fiber& f = *r.fiber;
  if (b.launch_failed->load(std::memory_order_relaxed)) {
    fail(b, "stopped: another block of this launch failed (see that error)");
  }
  const std::uint64_t progress = b.progress->load(std::memory_order_relaxed);
  const auto now = std::chrono::steady_clock::now();
  if (progress != f.seen_progress) {
    f.seen_progress = progress;
    f.spin_since = now;
  } else if (now - f.spin_since > std::chrono::seconds(b.hang_seconds)) {
    fail(b, "hung: thread " + text(f.tid) + " has spun on a flag at " + text(where) + " for " +
                std::to_string(b.hang_seconds) +
                " s while no block of the launch stored a flag, took an atomic or finished (TANDEM_SIM_HANG_SECONDS): "
                "it waits for a block that is not running, or for a store that never comes");
  }
}

void note_progress() { running().block->progress->fetch_add(1, std::memory_order_relaxed); }

void misaligned(const void* p, std::size_t bytes, const char* what) {
  const Running& r = running();
  const auto past = reinterpret_cast<std::uintptr_t>(p) % bytes;
  fail(*r.block, "thread " + text(r.fiber->tid) + ": " + what + " of " + std::to_string(bytes) +
                     " bytes at an address " + std::to_string(past) + " bytes past a multiple of " +
                     std::to_string(bytes) + " (a GPU faults there)");
}

void* dynamic_shared() {
  Block& b = *running().block;
  if (b.config->dynamic_shared_bytes == 0) {
    fail(b, "the kernel uses dynamic shared memory but was launched with 0 bytes of it");
  }
  return b.shared.data() + b.dynamic_offset;
}

}  // namespace tandem::sim


namespace tandem::gpu {

Dim3 thread_idx() { return sim::internal::current_fiber().tid; }
Dim3 block_idx() { return sim::internal::running().block->idx; }
Dim3 block_dim() { return sim::internal::running().block->config->block; }
Dim3 grid_dim() { return sim::internal::running().block->config->grid; }
unsigned warp_size() { return sim::internal::running().block->warp; }
void sync_threads(const std::source_location& where) {
  sim::internal::Running& r = sim::internal::running();
  r.fiber->state = sim::internal::State::barrier;
  r.fiber->where = where;
  sim::internal::suspend(r);
}

}  // namespace tandem::gpu


