// What Backend builds once on the device contract: memory through the caching allocator, the
// composite defaults of the optional ops, host events, recorded graphs, the extra queues.
#include "tandem/backend.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <new>
#include <sstream>
#include <vector>

#include "caching_allocator.hpp"
#include "host_event.hpp"
#include "host_memory.hpp"
#include "tandem/errors.hpp"
#include "tandem/kernels.hpp"

namespace tandem {

Backend::Backend() : memory_(std::make_unique<detail::CachingAllocator>(*this)) {}

Backend::~Backend() = default;

void Backend::host_parallel(Queue q, std::size_t n, std::size_t grain, unsigned max_threads,
                            const std::function<void(std::size_t, std::size_t)>& body) {
  (void)grain, (void)max_threads;
  if (memory_place().kind != MemoryPlace::Kind::host) {
    throw InvalidArgument("backend '" + name() + "' keeps its buffers in " + describe(memory_place()) +
                          ", which host threads cannot run a loop over: launch a kernel compiled for it "
                          "(tandem_add_kernels in CMake, docs/kernels.md)");
  }
  synchronize(q);
  if (n > 0) body(0, n);
}

std::string_view name_of(KernelTarget target) {
  switch (target) {
    case KernelTarget::host:
      return "the host (openmp, sim, sim64, reference)";
    case KernelTarget::cuda:
      return "cuda";
    case KernelTarget::hip:
      return "hip";
  }
  return "?";
}

KernelTarget kernel_target(const Backend& backend) {
  switch (backend.memory_place().kind) {
    case MemoryPlace::Kind::host:
      return KernelTarget::host;
    case MemoryPlace::Kind::cuda:
      return KernelTarget::cuda;
    case MemoryPlace::Kind::rocm:
      return KernelTarget::hip;
    case MemoryPlace::Kind::other:
      break;
  }
  throw InvalidArgument("backend '" + backend.name() + "' keeps its buffers in " + describe(backend.memory_place()) +
                        ", where no kernel of your own can run: use openmp, sim, cuda or hip");
}

namespace detail {
void check_kernel_target(const Backend& backend, KernelTarget compiled, const char* what) {
  const KernelTarget wanted = kernel_target(backend);
  if (wanted == compiled) return;
  throw InvalidArgument(std::string(what) + " was compiled for " + std::string(name_of(compiled)) + ", and backend '" +
                        backend.name() + "' runs code compiled for " + std::string(name_of(wanted)) +
                        ": compile the source for it too (tandem_add_kernels ... BACKENDS, docs/kernels.md)");
}
}  // namespace detail

std::vector<ReduceVariant> Backend::reduce_variants() const { return {}; }
std::vector<ScanVariant> Backend::scan_variants() const { return {}; }

void Backend::bias_activation(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                              const void* bias, UnaryOp act, void* z, std::int64_t ldz, void* out, std::int64_t ldo) {
  // out = x + bias (kept in z too when asked), then act over out row by row (ld may exceed cols).
  add_row_vector(q, t, rows, cols, x, ldx, bias, out, ldo);
  if (z != nullptr) add_row_vector(q, t, rows, cols, x, ldx, bias, z, ldz);
  const std::size_t elem = size_of(t);
  if (ldo == cols) {
    unary(q, act, t, static_cast<std::size_t>(rows * cols), out, out);
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    void* row = static_cast<unsigned char*>(out) + static_cast<std::size_t>(r * ldo) * elem;
    unary(q, act, t, static_cast<std::size_t>(cols), row, row);
  }
}

void Backend::adam_step(Queue q, DType t, std::size_t n, const AdamParams& p, void* w, const void* g, void* m,
                        void* v) {
  if (n == 0) return;
  const double c1 = 1 - std::pow(p.beta1, double(p.t)), c2 = 1 - std::pow(p.beta2, double(p.t));
  const std::size_t bytes = n * size_of(t);
  // Two temporaries from the caching allocator, freed after the queue has used them.
  struct Temp {
    Backend& be;
    Queue q;
    void* ptr;
    ~Temp() {
      try {
        be.synchronize(q);
      } catch (const Error&) {
        // the queue's error surfaces again at its next use
      }
      be.deallocate(ptr);
    }
  } tmp{*this, q, allocate(bytes)}, eps{*this, q, allocate(bytes)};
  scale(q, t, n, p.beta1, m, m);
  axpy(q, t, n, 1 - p.beta1, g, m);
  unary(q, UnaryOp::square, t, n, g, tmp.ptr);
  scale(q, t, n, p.beta2, v, v);
  axpy(q, t, n, 1 - p.beta2, tmp.ptr, v);
  if (p.weight_decay != 0) scale(q, t, n, 1 - p.learning_rate * p.weight_decay, w, w);
  scale(q, t, n, 1 / c2, v, tmp.ptr);
  unary(q, UnaryOp::sqrt, t, n, tmp.ptr, tmp.ptr);
  fill(q, t, n, p.epsilon, eps.ptr);
  binary(q, BinaryOp::add, t, n, tmp.ptr, eps.ptr, tmp.ptr);
  binary(q, BinaryOp::div, t, n, m, tmp.ptr, tmp.ptr);
  axpy(q, t, n, -p.learning_rate / c1, tmp.ptr, w);
}

void* Backend::allocate(std::size_t bytes, const std::source_location& where) {
  return memory_->allocate(bytes, where);
}

void Backend::deallocate(void* ptr) noexcept { memory_->deallocate(ptr); }

MemoryStats Backend::memory_stats() const { return memory_->stats(); }

void Backend::empty_cache() { memory_->empty_cache(); }

std::vector<LiveAllocation> Backend::live_allocations() const { return memory_->live(); }

bool Backend::tracks_allocations() const { return memory_->tracks(); }

std::string Backend::leak_report() const {
  const auto live = live_allocations();
  if (live.empty()) return "";
  std::ostringstream out;
  std::size_t total = 0;
  for (const auto& a : live) total += a.bytes;
  out << "tandem: backend '" << name() << "' still has " << live.size() << " live buffer(s), " << total << " bytes:\n";
  for (const auto& a : live) {
    out << "  " << a.bytes << " bytes allocated at ";
    if (a.file.empty()) {
      out << "(unknown: set TANDEM_DEBUG_MEMORY=1 to record where)";
    } else {
      out << a.file << ":" << a.line << " in " << a.function;
    }
    out << "\n";
  }
  return out.str();
}

void Backend::shutdown_memory() noexcept { memory_->shut_down(); }

void Backend::copy_to_device_async(Queue q, void* d_dst, const void* h_src, std::size_t bytes) {
  copy_to_device(q, d_dst, h_src, bytes);
}

void Backend::copy_to_host_async(Queue q, void* h_dst, const void* d_src, std::size_t bytes) {
  copy_to_host(q, h_dst, d_src, bytes);
}

Queue Backend::transfer_queue() {
  std::lock_guard lock(transfer_mutex_);
  if (transfer_queue_.id < 0) transfer_queue_ = create_queue();
  return transfer_queue_;
}

Queue Backend::collective_queue() {
  std::lock_guard lock(transfer_mutex_);
  if (collective_queue_.id < 0) collective_queue_ = create_queue();
  return collective_queue_;
}

Queue Backend::graph_queue() {
  std::lock_guard lock(transfer_mutex_);
  if (graph_queue_.id < 0) graph_queue_ = create_queue();
  return graph_queue_;
}

void* Backend::host_allocate(std::size_t bytes, bool& pinned) {
  pinned = false;
  const std::size_t rounded = (bytes + 63) / 64 * 64;
  // Linux overcommits: what could never be backed is refused now rather than killed for later.
  const std::size_t total = host::physical_memory_bytes();
  void* ptr = rounded == 0 || (total != 0 && rounded > total)
                  ? nullptr
                  : ::operator new(rounded, std::align_val_t(64), std::nothrow);
  if (ptr == nullptr && bytes != 0) throw OutOfMemory(bytes, host::available_memory_bytes(), name() + " (host)");
  return ptr;
}

void Backend::host_free(void* ptr, std::size_t, bool) {
  if (ptr != nullptr) ::operator delete(ptr, std::align_val_t(64));
}

void* Backend::managed_allocate(std::size_t) {
  throw Unsupported("backend '" + name() +
                    "' has no managed memory: use Buffer (device memory) with upload and download, or a GPU backend");
}

void Backend::managed_free(void*, std::size_t) noexcept {}

void Backend::read_probe(Queue, const void*, std::size_t, unsigned, unsigned, void*) {
  throw Unsupported("backend '" + name() +
                    "' has no device memory probe: `tandem bench memory` measures CPU backends on the host");
}

namespace {
// The graphs this thread is replaying: work that replays its own graph would recurse until the
// stack ran out.
thread_local std::vector<const Graph::Impl*> graphs_replaying;
}  // namespace

void Graph::replay() {
  if (!impl_) throw InvalidArgument("Graph::replay: this Graph is empty (make one with Backend::capture)");
  if (std::find(graphs_replaying.begin(), graphs_replaying.end(), impl_.get()) != graphs_replaying.end()) {
    throw InvalidArgument("Graph::replay: called from inside its own replay (a graph cannot contain itself)");
  }
  graphs_replaying.push_back(impl_.get());
  struct Pop {
    ~Pop() { graphs_replaying.pop_back(); }
  } pop;
  impl_->replay();
}

namespace {
// The backends whose recorded work this thread is running (Backend::capture's replay): a capture
// called from inside that work would nest, which the contract refuses.
thread_local std::vector<const Backend*> replaying;
}  // namespace

Graph Backend::capture(Queue, const std::function<void()>& work) {
  if (!work) throw InvalidArgument("capture: no work to record");
  if (std::find(replaying.begin(), replaying.end(), this) != replaying.end()) {
    throw InvalidArgument("capture: called from inside captured work on '" + name() +
                          "' (captures do not nest: capture the inner work on its own)");
  }
  struct Recorded final : Graph::Impl {
    const Backend* backend = nullptr;
    std::function<void()> work;
    void replay() override {
      replaying.push_back(backend);
      struct Pop {
        ~Pop() { replaying.pop_back(); }
      } pop;
      work();
    }
  };
  auto g = std::make_shared<Recorded>();
  g->backend = this;
  g->work = work;
  return Graph(std::move(g));
}

Event Backend::record_event(Queue q) {
  synchronize(q);
  return Event(std::make_shared<detail::HostEvent>());
}

double Backend::elapsed_ms(const Event& start, const Event& stop) {
  return detail::host_elapsed_ms(start.impl(), stop.impl());
}

void Backend::wait_event(Queue q, const Event& e) {
  if (e.impl() == nullptr) throw InvalidArgument("wait_event: the event was not recorded (use record_event)");
  synchronize(q);  // checks the queue; synchronous backends have finished all its work already
}

void Backend::synchronize_event(const Event& e) {
  if (e.impl() == nullptr) throw InvalidArgument("synchronize_event: the event was not recorded (use record_event)");
}

MemoryScope::MemoryScope(Backend& backend) : backend_(backend), slot_(backend.memory_->open_scope()) {}

MemoryScope::~MemoryScope() { backend_.memory_->close_scope(slot_); }

std::size_t MemoryScope::peak_bytes() const { return backend_.memory_->scope_peak(slot_); }

}  // namespace tandem
