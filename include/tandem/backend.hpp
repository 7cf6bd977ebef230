// The Backend interface: the contract every backend implements.
//
// The resource contract is small (device_allocate, device_free, copies, synchronize); the caching
// allocator, buffers and statistics are built on it once, here. The primitive ops take raw device
// pointers and run on a queue; the public API (ops.hpp) checks every argument before it calls them,
// so a backend may assume shapes, types, leading dimensions and devices are valid.
// Matrices are row-major: element (i, j) of a matrix with leading dimension ld is at [i * ld + j].
//
// Threads. A Backend may be used from several host threads at once, on its default queue and on
// queues of their own (create_queue may be called from any thread): every backend gives each
// caller the result it gets alone (tests/test_concurrency.cpp, also under ThreadSanitizer for
// reference, openmp and kokkos). Ops that threads queue on one queue run in the order the
// threads queue them; ops of different threads on the same buffers without a synchronize between
// them race, as any memory does. kokkos serialises its dispatches (Kokkos' default execution-space
// instance is one per process), so threads add no speed there. One capture at a time per
// backend; a nested one raises InvalidArgument. Objects that keep state between calls are one
// thread's at a time: a Buffer object being assigned or destroyed, an ml::Mlp, a data::Rng.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/device.hpp"
#include "tandem/dtype.hpp"
#include "tandem/memory.hpp"
#include "tandem/op_table.hpp"  // UnaryOp, BinaryOp and their rows

namespace tandem {

namespace detail {
class CachingAllocator;  // core/caching_allocator.hpp
}

enum class ScanKind { inclusive, exclusive };
enum class Transpose { no, yes };
enum class MatmulTier { automatic, naive, tiled, register_blocked, tensor_core, vendor };
// The ways a backend may keep of a whole-array reduction and a scan: teaching variants (the
// benchmark's ladder) and the vendor library's device-wide call (CUB on cuda, rocPRIM on hip: the
// peer the benchmark compares with). `automatic` is the backend's default, which may depend on the
// size and, on the GPU backends, on which kernels have run on hardware.
enum class ReduceVariant { automatic, single_pass, warp_shuffle, shared_tree, vendor };
enum class ScanVariant { automatic, decoupled_lookback, three_pass, single_block, vendor };

std::string_view name_of(BinaryOp op);
std::string_view name_of(UnaryOp op);
std::string_view name_of(ReduceOp op);
UnaryOp parse_activation(std::string_view name);  // an activation; InvalidArgument listing them
// The activations' names joined for messages and help: "relu, sigmoid, tanh, gelu or silu".
std::string activation_names();
std::string_view name_of(MatmulTier tier);
MatmulTier parse_matmul_tier(std::string_view name);  // "naive", "tiled", ..., "auto"
// "auto", "single_pass", ...; the vendor variant is "vendor", and parses from "cub" and "rocprim"
// too. Parsing throws InvalidArgument listing the names; "" parses as automatic.
std::string_view name_of(ReduceVariant variant);
std::string_view name_of(ScanVariant variant);
ReduceVariant parse_reduce_variant(std::string_view name);
ScanVariant parse_scan_variant(std::string_view name);

// Where memory lives, in the terms DLPack uses for devices.
struct MemoryPlace {
  enum class Kind { host, cuda, rocm, other };
  Kind kind = Kind::host;
  int device = 0;  // the device ordinal (cuda, rocm)
  bool operator==(const MemoryPlace&) const = default;
};
std::string describe(const MemoryPlace& place);  // "host memory", "CUDA device 1", ...

// A queue of work on one backend. Queue{} is the backend's default queue.
struct Queue {
  int id = 0;
};

// A point in a queue's work, for timing and waiting. Backends subclass Event::Impl.
class Event {
 public:
  struct Impl {
    virtual ~Impl() = default;
  };
  Event() = default;
  explicit Event(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Impl* impl() const { return impl_.get(); }

 private:
  std::shared_ptr<Impl> impl_;
};

// A sequence of ops recorded on one queue, replayed as a whole (Backend::capture).
class Graph {
 public:
  struct Impl {
    virtual ~Impl() = default;
    virtual void replay() = 0;
  };
  Graph() = default;
  explicit Graph(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  // Queues the recorded ops again, on the queue they were captured on, reading and writing the
  // same buffers (which must stay alive). InvalidArgument on an empty Graph.
  void replay();
  bool empty() const { return !impl_; }

 private:
  std::shared_ptr<Impl> impl_;
};

// C = alpha * op(A) * op(B) + beta * C with op(A) (m, k), op(B) (k, n), C (m, n), all row-major.
// A and B share ab_type; C is f32 for f16/bf16 inputs and the input type otherwise.
// With beta == 0, C is not read (it may hold NaN). alpha == 0 never reaches a backend.
struct GemmArgs {
  Transpose trans_a = Transpose::no;
  Transpose trans_b = Transpose::no;
  std::int64_t m = 0, n = 0, k = 0;
  double alpha = 1, beta = 0;
  DType ab_type = DType::f32;
  DType c_type = DType::f32;
  const void* a = nullptr;
  std::int64_t lda = 0;
  const void* b = nullptr;
  std::int64_t ldb = 0;
  void* c = nullptr;
  std::int64_t ldc = 0;
  MatmulTier tier = MatmulTier::automatic;  // never automatic when it reaches a backend
  bool tf32 = false;                        // f32 inputs: TF32 products allowed (cuBLAS vendor tier)
};

// One Adam step (AdamW: decoupled weight decay) at step t >= 1 on n parameters, in place:
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   w = w - lr * decay * w - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
struct AdamParams {
  double learning_rate = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  double weight_decay = 0;
  std::uint64_t t = 1;
};

// A backend's device-side collective (cuda: NCCL): buffers summed, averaged or maximised across
// the processes of a job on the device, without staging through the host. tandem::dist uses it
// when the buffers' backend has one, and stages them through MPI otherwise.
class DeviceCollective {
 public:
  enum class Op { sum, mean, max };
  struct Part {
    void* data;
    std::size_t count;
    DType dtype;  // f32, f64 or i32
  };
  virtual ~DeviceCollective() = default;
  // Every part in place, as one group, queued on q after the work queued there before (the host
  // does not wait). rank and size place this process in the job; on first use the collective
  // sets itself up, and share(bytes, n) must then copy n bytes from rank 0 to every rank (dist
  // passes an MPI broadcast). Every rank must pass the same parts in the same order.
  virtual void allreduce(Queue q, std::span<const Part> parts, Op op, int rank, int size,
                         const std::function<void(void*, std::size_t)>& share) = 0;
};

// Backends are always owned by a std::shared_ptr (the registry's or create_backend's); every
// buffer keeps its backend alive.
class Backend : public std::enable_shared_from_this<Backend> {
 public:
  Backend();
  virtual ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // ---- discovery ----
  // Registry name, e.g. "openmp", "cuda:1".
  virtual std::string name() const = 0;
  virtual DeviceProperties properties() const = 0;
  // Where this backend's buffers live: host memory (the CPU backends, and the simulator, whose
  // device memory is host memory), a CUDA or ROCm device by ordinal, or memory tandem cannot name
  // to other libraries (Kokkos' device spaces). Buffer::wrap and DLPack exchange follow it.
  virtual MemoryPlace memory_place() const { return {}; }

  // ---- resource contract (each backend implements these) ----
  // Allocates device memory; returns nullptr when the device has not enough (the caller throws).
  virtual void* device_allocate(std::size_t bytes) = 0;
  virtual void device_free(void* ptr, std::size_t bytes) = 0;
  // Bytes the device could still give; used in OutOfMemory messages.
  virtual std::size_t device_free_bytes() const = 0;
  virtual void copy_to_device(Queue q, void* d_dst, const void* h_src, std::size_t bytes) = 0;
  virtual void copy_to_host(Queue q, void* h_dst, const void* d_src, std::size_t bytes) = 0;
  virtual void copy_on_device(Queue q, void* d_dst, const void* d_src, std::size_t bytes) = 0;
  // Optional: copies that may return before they are done: the host memory must stay unchanged
  // (to_device) or unread (to_host) until q has passed the copy (synchronize, or an event).
  // Asynchronous on GPU runtimes; from page-locked memory they overlap compute on other queues.
  // Default: the synchronous copies above.
  virtual void copy_to_device_async(Queue q, void* d_dst, const void* h_src, std::size_t bytes);
  virtual void copy_to_host_async(Queue q, void* h_dst, const void* d_src, std::size_t bytes);
  // Optional: page-locked host memory for fast transfers. Default: plain aligned host memory.
  virtual void* host_allocate(std::size_t bytes, bool& pinned);
  virtual void host_free(void* ptr, std::size_t bytes, bool pinned);
  // Optional: managed (unified) memory, addressed by both the host and the device and migrated
  // between them on demand by the runtime (CUDA and HIP managed memory; the simulator's device
  // memory is host memory, so it has it too). Default: none; managed_allocate throws Unsupported.
  // managed_allocate returns nullptr when there is not enough (the caller throws OutOfMemory).
  virtual bool has_managed_memory() const { return false; }
  virtual void* managed_allocate(std::size_t bytes);
  virtual void managed_free(void* ptr, std::size_t bytes) noexcept;

  // ---- queues and events (CPU backends run synchronously; the default queue is id 0) ----
  virtual Queue create_queue() { return Queue{}; }
  // A second queue for transfers that overlap compute on the default queue, created on first use
  // and kept for the backend's life (GPU runtimes have a bounded number of queues).
  Queue transfer_queue();
  // A third, for passes recorded as graphs and replayed (Mlp::forward_backward_graph), likewise
  // created on first use and kept.
  Queue graph_queue();
  virtual void synchronize(Queue q) = 0;
  virtual Event record_event(Queue q);
  // Milliseconds between two recorded events (waits for both).
  virtual double elapsed_ms(const Event& start, const Event& stop);
  // Work queued on q after this call starts only once e has passed: ordering across queues
  // without stopping the host. Backends whose queues run synchronously have nothing to wait for.
  virtual void wait_event(Queue q, const Event& e);
  // The host waits until e has passed.
  virtual void synchronize_event(const Event& e);

  // ---- graphs ----
  // Records the ops `work` queues on q, without running them, as a Graph to replay. On cuda:
  // CUDA stream capture into a graph instantiated once, every replay one launch of the whole
  // sequence. q must come from create_queue() (CUDA's default stream cannot be captured), and
  // work must queue on q alone: ops on other queues would run once, at capture, and not be part
  // of the graph. Nothing in it may wait for the host (a synchronous copy, a download, a
  // TANDEM_PROFILE timer): that invalidates the capture, which raises DeviceError saying so. One
  // capture at a time per backend; a nested one raises InvalidArgument. Elsewhere the work itself
  // is kept and a replay runs it again, op by op: the same results on the queue q; a capture
  // called from inside that work raises InvalidArgument when the replay reaches it.
  virtual Graph capture(Queue q, const std::function<void()>& work);

  // ---- primitive ops ----
  // out[i] = op(x[i], y[i]); dtype f32 or f64.
  virtual void binary(Queue q, BinaryOp op, DType t, std::size_t n, const void* x, const void* y, void* out) = 0;
  // out[i] = op(x[i]); dtype f32 or f64.
  virtual void unary(Queue q, UnaryOp op, DType t, std::size_t n, const void* x, void* out) = 0;
  // y[i] += alpha * x[i].
  virtual void axpy(Queue q, DType t, std::size_t n, double alpha, const void* x, void* y) = 0;
  // out[i] = alpha * x[i].
  virtual void scale(Queue q, DType t, std::size_t n, double alpha, const void* x, void* out) = 0;
  // out[i] = value; any dtype.
  virtual void fill(Queue q, DType t, std::size_t n, double value, void* out) = 0;
  // out (rows, cols) = x (rows, cols) + bias (cols) broadcast over rows.
  virtual void add_row_vector(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                              const void* bias, void* out, std::int64_t ldo) = 0;
  // Optional, fused for speed (a layer's epilogue): out = act(x + bias broadcast over rows), and
  // z = x + bias as well when z is not null (backward passes that need the pre-activation).
  // act is an activation (is_activation); f32 or f64. z may be x (in place); out may not overlap x.
  // The default composes add_row_vector and unary.
  virtual void bias_activation(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                               const void* bias, UnaryOp act, void* z, std::int64_t ldz, void* out, std::int64_t ldo);
  // c = alpha * a + beta * b, all (rows, cols).
  virtual void matrix_add(Queue q, DType t, std::int64_t rows, std::int64_t cols, double alpha, const void* a,
                          std::int64_t lda, double beta, const void* b, std::int64_t ldb, void* c,
                          std::int64_t ldc) = 0;
  // out (cols, rows) = a (rows, cols) transposed; any dtype.
  virtual void transpose(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* a, std::int64_t lda,
                         void* out, std::int64_t ldo) = 0;
  // out row r = x row index[r], for r in [0, rows); each row has cols elements; any dtype.
  // An index outside [0, x_rows) gives a row of NaN (-1 for i32) instead of reading out of bounds.
  virtual void gather_rows(Queue q, DType t, std::int64_t rows, std::int64_t cols, const std::int32_t* index,
                           std::int64_t x_rows, const void* x, std::int64_t ldx, void* out, std::int64_t ldo) = 0;
  // out[i] = x[i] converted from type `from` to type `to` (f16, bf16, f32, f64), rounded to
  // nearest even (through f32 when both are narrower than f64 or when one is f16/bf16).
  virtual void convert(Queue q, DType from, DType to, std::size_t n, const void* x, void* out) = 0;
  // The matmul tiers this backend has for input type ab (never "automatic").
  virtual std::vector<MatmulTier> matmul_tiers(DType ab) const = 0;
  // The variants this backend keeps of reduce and scan (never automatic); empty when it has one
  // way only. What automatic takes: backends/gpu/gpu_reductions.hpp.
  virtual std::vector<ReduceVariant> reduce_variants() const;
  virtual std::vector<ScanVariant> scan_variants() const;
  // The tier "automatic" resolves to for this problem.
  virtual MatmulTier choose_matmul_tier(const GemmArgs& args) const = 0;
  virtual void matmul(Queue q, const GemmArgs& args) = 0;
  // result[0] = op(x[0..n)); n >= 1. result has x's dtype, except argmax which writes an i32 index
  // (the first maximum; the first NaN if any). min, max and argmax propagate NaN.
  // variant: automatic or one of reduce_variants() (the public API checks it).
  virtual void reduce(Queue q, ReduceOp op, DType t, std::size_t n, const void* x, void* result,
                      ReduceVariant variant) = 0;
  // result[0] = sum x[i] * y[i]; f32 or f64.
  virtual void dot(Queue q, DType t, std::size_t n, const void* x, const void* y, void* result) = 0;
  // Per row (out has rows elements) or per column (cols elements) sum or max of x (rows, cols).
  virtual void reduce_rows(Queue q, ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x,
                           std::int64_t ldx, void* out) = 0;
  virtual void reduce_cols(Queue q, ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x,
                           std::int64_t ldx, void* out) = 0;
  // Inclusive: out[i] = x[0] + ... + x[i]; exclusive: out[i] = x[0] + ... + x[i-1], out[0] = 0.
  // f32, f64, i32 (i32 wraps modulo 2^32). out may alias x.
  // variant: automatic or one of scan_variants().
  virtual void scan(Queue q, ScanKind kind, DType t, std::size_t n, const void* x, void* out,
                    ScanVariant variant) = 0;
  // Row-wise stable softmax of logits (rows, cols) into probs, and losses[r] = -log probs[r][label[r]]
  // (NaN where a label is outside [0, cols)). labels are i32.
  virtual void softmax_cross_entropy(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* logits,
                                     std::int64_t ld_logits, const std::int32_t* labels, void* probs,
                                     std::int64_t ld_probs, void* losses) = 0;
  // result[0] = mean((a[i] - b[i])^2); n >= 1.
  virtual void mse(Queue q, DType t, std::size_t n, const void* a, const void* b, void* result) = 0;
  // Optional, fused for speed: an Adam step on w with gradient g and moments m, v (f32 or f64).
  // The default composes the elementwise primitives above (eight passes over memory instead of one).
  virtual void adam_step(Queue q, DType t, std::size_t n, const AdamParams& p, void* w, const void* g, void* m,
                         void* v);

  // ---- diagnostics ----
  // Optional, for `tandem bench memory`: reads the f32 array data[0, bytes / 4) `passes` times on
  // the device (with `shared_per_block` > 0: each block copies that many elements of it into
  // on-chip shared memory once and reads those `passes` times) and adds the sum of what it read
  // to the f32 *sink. The grid is what fills the device; blocks() says how many blocks it has.
  // Default: Unsupported (CPU backends are measured by the host loop of `tandem bench memory`).
  virtual void read_probe(Queue q, const void* data, std::size_t bytes, unsigned passes, unsigned shared_per_block,
                          void* sink);
  virtual unsigned probe_blocks() const { return 0; }

  // ---- user kernels (tandem/kernels.hpp) ----
  // Runs body(begin, end) over chunks that cover [0, n), each of at least `grain` items (the last
  // may be shorter), once the queue's earlier work is done, on this backend's host threads: the
  // openmp backend's team, at most max_threads of them when it is not 0 (on the calling thread
  // when there is one chunk); one thread on the other backends whose memory is the host's.
  // InvalidArgument on a backend whose memory is not (a GPU's). A throw from body reaches the
  // caller after every chunk started has returned.
  virtual void host_parallel(Queue q, std::size_t n, std::size_t grain, unsigned max_threads,
                             const std::function<void(std::size_t begin, std::size_t end)>& body);
  // The queue's native handle, for launching kernels of one's own on it: the cudaStream_t on cuda,
  // the hipStream_t on hip (queue 0: the default stream, a null handle); nullptr on the others,
  // which run work on the calling thread.
  virtual void* native_queue(Queue q) {
    (void)q;
    return nullptr;
  }

  // ---- collectives ----
  // Optional: this backend's device-side collective; nullptr (the default) when it has none.
  virtual DeviceCollective* collective() { return nullptr; }
  // A queue for collectives that overlap compute on the default queue, created on first use and
  // kept, like transfer_queue().
  Queue collective_queue();

  // ---- memory, built on the resource contract (not virtual) ----
  // Allocates through the caching allocator; throws OutOfMemory. The location is kept for the
  // leak report when TANDEM_DEBUG_MEMORY=1.
  void* allocate(std::size_t bytes, const std::source_location& where = std::source_location::current());
  void deallocate(void* ptr) noexcept;
  MemoryStats memory_stats() const;
  // Returns cached blocks to the device.
  void empty_cache();
  // Buffers still alive, with where they were allocated (tracked when TANDEM_DEBUG_MEMORY=1).
  std::vector<LiveAllocation> live_allocations() const;
  bool tracks_allocations() const;
  // Human-readable list of live allocations ("" when none).
  std::string leak_report() const;

  // True while this backend records a graph from a real stream capture (cuda, hip): ops queued
  // now run only at replay. The allocator then does not give its cache back to the device on a
  // failed allocation (freeing device memory waits for the device, which would invalidate the
  // capture): it raises OutOfMemory at once; ops that would read data back skip that.
  virtual bool capturing() const noexcept { return false; }

 protected:
  // Told of every block the caching allocator hands out: `requested` of its `block` bytes are in
  // use (the simulator guards the rest). Called with the allocator's lock held.
  virtual void on_allocate(void* ptr, std::size_t requested, std::size_t block) noexcept {
    (void)ptr, (void)requested, (void)block;
  }

  // Reports leaks (TANDEM_DEBUG_MEMORY=1) and gives every cached block back to the device; later
  // frees go straight to the device. Backends never call it from their destructors: every backend
  // is created as a detail::Owned<B> (core/factories.hpp), whose destructor calls it while the
  // device state of B is still alive. Idempotent.
  void shutdown_memory() noexcept;

 private:
  friend class MemoryScope;
  friend class detail::CachingAllocator;  // calls the device contract and the two hooks above
  std::unique_ptr<detail::CachingAllocator> memory_;
  std::mutex transfer_mutex_;
  Queue transfer_queue_{-1};
  Queue graph_queue_{-1};
  Queue collective_queue_{-1};
};

}  // namespace tandem
