// The sweep behind `tandem bench` and `tandem compare` (see sweep.hpp).
#include "sweep.hpp"

#include <unistd.h>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "tandem/detail/timing.hpp"
#include "tandem/tandem.hpp"

namespace tandem::cli::sweep {
namespace {

using Op = std::function<void()>;

// How a timed run starts with its data evicted from the caches instead of left there by the run
// before. On an x86-64 CPU backend (host memory) the operands' own cache lines are flushed from
// every level (clflush, on the calling thread), which costs their size, and only they leave the
// caches (the backend's kept packing memory, the code and the TLB stay warm); elsewhere (GPU
// caches, other CPUs) `flusher`, a buffer twice the last-level cache, is written over. Writing
// twice a 480 MiB L3 before every run made `tandem compare` on openmp take 109 s instead of 13
// warm on a 2-vCPU Xeon VM.
struct Cold {
  Buffer* flusher = nullptr;      // written over before each run; without one:
  std::vector<Buffer*> operands;  // these buffers' lines flushed
};

#if defined(__x86_64__)
constexpr bool kLineFlush = true;
void flush_lines(const void* data, std::size_t bytes) {
  constexpr std::uintptr_t kLine = 64;  // x86's cache line; clflush takes the line of its address
  const auto first = reinterpret_cast<std::uintptr_t>(data) & ~(kLine - 1);
  const auto end = reinterpret_cast<std::uintptr_t>(data) + bytes;
  for (std::uintptr_t at = first; at < end; at += kLine) _mm_clflush(reinterpret_cast<const void*>(at));
  _mm_mfence();
}
#else
constexpr bool kLineFlush = false;
void flush_lines(const void*, std::size_t) {}
#endif

// Kernel-only: events around each run on the default queue, after one untimed warm-up run;
// repeated until min_seconds have passed (at least 3 runs, at most 100). With `cold`, the data is
// evicted before each run, outside the events (at most 30 runs then: each eviction costs).
// With `on_host`, for kernels on another thread pool than the backend's (OpenBLAS on a CPU
// backend): the calling thread writes the flusher itself where there is one (a CPU backend's
// memory is host memory; on x86-64 it flushes the operands' lines in any case), and the timing
// starts and ends with a pause of kSettle, so that neither pool's idle threads spin on the cores
// the other needs (OpenBLAS sgemm at 256^3 measured 1.5 ms instead of 0.3 right after an OpenMP
// flush on 2 vCPUs; our tiers ran at a third of their speed right after OpenBLAS: its threads
// spin for longer than 20 ms).
constexpr auto kSettle = std::chrono::milliseconds(250);
Timing time_kernel(Backend& be, const Op& op, double min_seconds, const Cold* cold = nullptr, bool on_host = false) {
  if (on_host) std::this_thread::sleep_for(kSettle);
  struct After {
    bool pause;
    ~After() {
      if (pause) std::this_thread::sleep_for(kSettle);
    }
  } after{on_host};
  op();
  be.synchronize(Queue{});
  int run = 0;
  const detail::Samples s = detail::repeat_median(
      [&] {
        const int pattern = run++ % 7;
        if (cold != nullptr && cold->flusher == nullptr) {
          for (Buffer* operand : cold->operands) flush_lines(operand->data(), operand->bytes());
        } else if (cold != nullptr && on_host) {
          std::memset(cold->flusher->data(), pattern, cold->flusher->bytes());
        } else if (cold != nullptr) {
          cold->flusher->fill(double(pattern));
        }
        const Event a = be.record_event(Queue{});
        op();
        const Event b = be.record_event(Queue{});
        return be.elapsed_ms(a, b);
      },
      3, cold != nullptr ? 30 : 100, 1e3 * min_seconds);
  Timing t;
  t.median_ms = s.median_ms;
  t.min_ms = s.min_ms;
  t.max_ms = s.max_ms;
  t.reps = s.reps;
  return t;
}

// End to end on the host clock: the median of up to 5 runs (fewer past 0.2 s).
double time_host(Backend& be, const Op& op) {
  op();
  be.synchronize(Queue{});
  return detail::repeat_median(
             [&] {
               return detail::host_ms([&] {
                 op();
                 be.synchronize(Queue{});
               });
             },
             1, 5, 200)
      .median_ms;
}

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Sizes per algorithm, capped for the slow backends (the reference and the simulators are
// correctness tools: their small sizes show the shape of the curve, no more).
std::vector<std::size_t> sizes(const std::string& algorithm, bool full, BackendKind kind, bool reference) {
  const bool slow = kind == BackendKind::simulator || reference;
  std::vector<std::size_t> s;
  if (algorithm == "matmul") {
    s = full ? std::vector<std::size_t>{32, 64, 128, 256, 512, 1024, 2048} : std::vector<std::size_t>{64, 256, 1024};
    if (slow) std::erase_if(s, [](std::size_t n) { return n > 256; });
  } else {
    if (full) {
      for (std::size_t n = std::size_t(1) << 10; n <= (std::size_t(1) << 26); n <<= 2) s.push_back(n);
    } else {
      s = {std::size_t(1) << 12, std::size_t(1) << 16, std::size_t(1) << 20, std::size_t(1) << 24};
    }
    if (slow) std::erase_if(s, [](std::size_t n) { return n > (std::size_t(1) << 20); });
  }
  return s;
}

// Chunks of the overlapped end-to-end run, from this many elements (below, the chunks are too
// small for their launches and copies to pay).
constexpr std::size_t kOverlapChunks = 8;
constexpr std::size_t kOverlapFrom = std::size_t(1) << 16;

struct Setup {
  double bytes = 0, flops = 0;
  // End to end, each from host data to a host result (empty: not available here):
  //   pageable: upload, kernel, download from ordinary host memory;
  //   pinned: the same from page-locked memory (asynchronous copies);
  //   overlap: pinned, in kOverlapChunks chunks on two queues, so one chunk's copies run while
  //     another computes (add, axpy, sum, dot: the algorithms whose chunks are independent);
  //   managed: the host writes the inputs into managed memory, the kernel runs on it, the host
  //     reads the result (the runtime migrates pages on demand).
  Op kernel, e2e_pageable, e2e_pinned, e2e_overlap, e2e_managed;
  std::vector<Buffer> keep, managed;
  std::vector<HostBuffer> pinned;
  std::vector<std::vector<float>> pageable;
  std::vector<float> managed_out;
  Buffer partials;  // overlap: one partial result per chunk (sum, dot)
  std::size_t out_elems = 0;
};

// The kernel of `algorithm` on x, y and out (n elements, or N x N matrices for matmul) on queue q.
Op kernel_of(const std::string& algorithm, const std::string& variant, std::size_t n, Buffer& x, Buffer& y, Buffer& o,
             Queue q = {}) {
  if (algorithm == "add") return [&x, &y, &o, q] { add(x, y, o, q); };
  if (algorithm == "axpy") return [&x, &y, q] { axpy(1e-3, x, y, q); };
  if (algorithm == "sum") {
    const ReduceVariant v = parse_reduce_variant(variant);
    return [&x, &o, q, v] { tandem::reduce(ReduceOp::sum, x, o, q, v); };
  }
  if (algorithm == "dot") return [&x, &y, &o, q] { dot(x, y, o, q); };
  if (algorithm == "scan") {
    const ScanVariant v = parse_scan_variant(variant);
    return [&x, &o, q, v] { tandem::inclusive_scan(x, o, q, v); };
  }
  const auto N = static_cast<std::int64_t>(n);
  if (algorithm == "softmax") {  // softmax_cross_entropy over rows of 1024: x logits, o probabilities
    const std::int64_t cols = std::min<std::int64_t>(N, 1024), rows = N / cols;
    std::vector<std::int32_t> classes(static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) classes[static_cast<std::size_t>(r)] = std::int32_t(r % cols);
    Buffer labels = Buffer::from(x.backend(), classes), losses(x.backend(), DType::f32, std::size_t(rows));
    return [&x, &o, q, rows, cols, labels, losses]() mutable {  // labels known good: no read-back
      Matrix probs = matrix(o, rows, cols);
      softmax_cross_entropy(matrix(x, rows, cols), labels, probs, losses, q, LabelCheck::trusted);
    };
  }
  MatmulOptions opt;
  opt.tier = variant.empty() ? MatmulTier::automatic : parse_matmul_tier(variant);
  return [&x, &y, &o, N, opt] {
    Matrix c = matrix(o, N, N);
    matmul(matrix(x, N, N), matrix(y, N, N), c, opt);
  };
}

// Host -> device from a pinned buffer (asynchronous where the runtime allows).
void up(Backend& be, Buffer& d, HostBuffer& h) { be.copy_to_device_async(Queue{}, d.data(), h.data(), d.bytes()); }
void down(Backend& be, HostBuffer& h, const Buffer& d) {
  be.copy_to_host_async(Queue{}, h.data(), d.data(), d.bytes());
}

// Managed memory for the inputs and the result only where the device has room for them twice
// over: managed memory beyond the device's free memory would measure paging, not transfers.
bool managed_fits(Backend& be, double bytes) {
  return be.has_managed_memory() && 2 * bytes < double(be.device_free_bytes());
}

// On the heap: the ops refer to its members, which must not move.
std::unique_ptr<Setup> setup(Backend& be, const std::string& algorithm, const std::string& variant, std::size_t n) {
  auto owner = std::make_unique<Setup>();
  Setup& s = *owner;
  const bool mm = algorithm == "matmul";
  const std::size_t elems = mm ? n * n : n;
  s.pageable.push_back(random_floats(elems, 1));
  s.pageable.push_back(random_floats(elems, 2));
  const bool scalar = algorithm == "sum" || algorithm == "dot";
  s.out_elems = scalar ? 1 : elems;
  s.pageable.push_back(std::vector<float>(s.out_elems));
  Buffer x = Buffer::from(be, s.pageable[0]), y = Buffer::from(be, s.pageable[1]), out(be, DType::f32, s.out_elems);
  s.keep = {x, y, out};
  for (int i = 0; i < 3; ++i) {
    s.pinned.emplace_back(be, DType::f32, s.pageable[std::size_t(i)].size());
    std::copy(s.pageable[std::size_t(i)].begin(), s.pageable[std::size_t(i)].end(),
              s.pinned.back().span<float>().begin());
  }
  Buffer& bx = s.keep[0];
  Buffer& by = s.keep[1];
  Buffer& bo = s.keep[2];
  s.kernel = kernel_of(algorithm, variant, n, bx, by, bo);
  // The inputs each algorithm reads (uploaded end to end) and what it writes (downloaded).
  const bool uses_y = algorithm != "sum" && algorithm != "scan" && algorithm != "softmax";
  if (algorithm == "add" || algorithm == "axpy") s.bytes = 3.0 * 4 * double(n);
  if (algorithm == "sum") s.bytes = 4.0 * double(n);
  if (algorithm == "dot" || algorithm == "scan" || algorithm == "softmax") s.bytes = 2.0 * 4 * double(n);
  if (mm) {
    s.bytes = 3.0 * 4 * double(n) * double(n);
    s.flops = 2.0 * double(n) * double(n) * double(n);
  }
  // axpy writes y: that is its result. Every way downloads into its own host result (index 2).
  const bool result_is_y = algorithm == "axpy";
  Buffer& result = result_is_y ? by : bo;
  s.e2e_pageable = [&s, &bx, &by, &result, uses_y] {
    bx.upload(s.pageable[0]);
    if (uses_y) by.upload(s.pageable[1]);
    s.kernel();
    result.download(std::span<float>(s.pageable[2]));
  };
  s.e2e_pinned = [&s, &be, &bx, &by, &result, uses_y] {
    up(be, bx, s.pinned[0]);
    if (uses_y) up(be, by, s.pinned[1]);
    s.kernel();
    down(be, s.pinned[2], result);
    be.synchronize(Queue{});
  };
  if (n >= kOverlapFrom && (algorithm == "add" || algorithm == "axpy" || scalar)) {
    s.pinned.emplace_back(be, DType::f32, scalar ? kOverlapChunks : elems);  // [3]: the overlapped result
    s.partials = Buffer(be, DType::f32, kOverlapChunks);
    s.e2e_overlap = [&s, &be, &bx, &by, &bo, algorithm, scalar, uses_y, n] {
      const Queue queues[2] = {Queue{}, be.transfer_queue()};
      auto* hx = static_cast<char*>(s.pinned[0].data());
      auto* hy = static_cast<char*>(s.pinned[1].data());
      auto* hr = static_cast<char*>(s.pinned[3].data());
      for (std::size_t c = 0; c < kOverlapChunks; ++c) {
        const Queue q = queues[c % 2];
        const std::size_t from = n * c / kOverlapChunks, count = n * (c + 1) / kOverlapChunks - from;
        const std::size_t at = from * sizeof(float), bytes = count * sizeof(float);
        Buffer xc = bx.slice(from, count), yc = by.slice(from, count);
        be.copy_to_device_async(q, xc.data(), hx + at, bytes);
        if (uses_y) be.copy_to_device_async(q, yc.data(), hy + at, bytes);
        if (scalar) {
          Buffer part = s.partials.slice(c, 1);
          if (algorithm == "sum") {
            tandem::reduce(ReduceOp::sum, xc, part, q);
          } else {
            dot(xc, yc, part, q);
          }
          be.copy_to_host_async(q, hr + c * sizeof(float), part.data(), sizeof(float));
        } else {
          Buffer oc = (algorithm == "axpy" ? by : bo).slice(from, count);
          if (algorithm == "axpy") {
            axpy(1e-3, xc, oc, q);
          } else {
            add(xc, yc, oc, q);
          }
          be.copy_to_host_async(q, hr + at, oc.data(), bytes);
        }
      }
      be.synchronize(queues[0]);
      be.synchronize(queues[1]);
      if (scalar) {
        // The host adds the chunks' partial results: part of the end-to-end time.
        float total = 0;
        for (float v : s.pinned[3].span<float>()) total += v;
        s.pinned[3].span<float>()[0] = total;
      }
    };
  }
  if (!mm && managed_fits(be, 3.0 * 4 * double(elems))) {
    s.managed = {Buffer::managed(be, DType::f32, elems), Buffer::managed(be, DType::f32, elems),
                 Buffer::managed(be, DType::f32, s.out_elems)};
    s.managed_out.resize(s.out_elems);
    Op on_managed = kernel_of(algorithm, variant, n, s.managed[0], s.managed[1], s.managed[2]);
    s.e2e_managed = [&s, &be, uses_y, result_is_y, on_managed] {
      std::copy(s.pageable[0].begin(), s.pageable[0].end(), s.managed[0].host_span<float>().begin());
      if (uses_y) std::copy(s.pageable[1].begin(), s.pageable[1].end(), s.managed[1].host_span<float>().begin());
      on_managed();
      be.synchronize(Queue{});
      const std::span<float> r = s.managed[result_is_y ? 1 : 2].host_span<float>();
      std::copy(r.begin(), r.end(), s.managed_out.begin());
    };
  }
  return owner;
}

// Each end-to-end way must give the pageable way's result (within rounding: chunked sums add in
// another order, a GPU scan's look-back adds in an order that depends on timing, and fused
// multiply-adds round once): a measurement of a wrong answer is worth
// nothing. Throws DeviceError naming the way and the first element that differs.
void check_same(const Setup& s, std::span<const float> got, const char* way, const std::string& algorithm,
                const std::string& backend, std::size_t n) {
  const std::vector<float>& want = s.pageable[2];
  // Sums and dots: within 1e-5 of the sum of magnitudes (a lost or doubled chunk is far outside).
  double magnitude = 0;
  if (algorithm == "sum" || algorithm == "dot") {
    for (std::size_t i = 0; i < n; ++i) {
      magnitude += std::fabs(double(s.pageable[0][i]) * (algorithm == "dot" ? double(s.pageable[1][i]) : 1.0));
    }
  }
  // Scans: within 1e-5 of the sum of magnitudes up to each element (on an H200 two runs of one
  // scan differed by 2e-6 where the running sum had cancelled to -0.58: there an element's own
  // size says nothing of its error).
  const bool scan = algorithm == "scan";
  double running = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double a = want[i], b = got[i];
    if (scan && i < n) running += std::fabs(double(s.pageable[0][i]));
    const double bound = magnitude > 0 ? 1e-5 * magnitude
                         : scan        ? 1e-5 * running + 1e-30
                                       : 1e-6 * (std::fabs(a) + std::fabs(b)) + 1e-30;
    if (!(std::fabs(a - b) <= bound)) {
      throw DeviceError(algorithm + " on " + backend + " at " + std::to_string(n) + ", end to end " + way +
                        ": element " + std::to_string(i) + " is " + std::to_string(b) +
                        " where the pageable way gave " + std::to_string(a) +
                        "; the timing would describe a wrong result (please report this)");
    }
  }
}

std::vector<std::string> variants_of(Backend& be, const std::string& algorithm, bool all) {
  if (!all) return {""};
  std::vector<std::string> v;
  if (algorithm == "sum") {
    for (ReduceVariant r : be.reduce_variants()) v.emplace_back(name_of(r));
  }
  if (algorithm == "scan") {
    for (ScanVariant s : be.scan_variants()) v.emplace_back(name_of(s));
  }
  if (algorithm == "matmul") {
    for (MatmulTier t : be.matmul_tiers(DType::f32)) v.emplace_back(name_of(t));
  }
  if (v.empty()) v.emplace_back("");
  return v;
}

// The backend's device-to-device copy bandwidth for n floats (bytes read + written), cold like
// the kernels it is the limit of when `cold` is given (its operands then a and b).
double copy_gbps(Backend& be, std::size_t n, double min_seconds, const Cold* cold) {
  Buffer a(be, DType::f32, n), b(be, DType::f32, n);
  a.fill(1);
  Cold own;
  if (cold != nullptr) own = cold->flusher != nullptr ? *cold : Cold{nullptr, {&a, &b}};
  const Timing t = time_kernel(
      be, [&] { copy(a, b); }, min_seconds, cold != nullptr ? &own : nullptr);
  return 2.0 * 4 * double(n) / (t.median_ms * 1e6);
}

// Bytes that evict the device's caches when written: twice its last-level cache (L3 or L2 on a
// CPU, L2 on a GPU); 0 when the backend does not say how large its caches are.
std::size_t flush_bytes(const DeviceProperties& p) {
  return 2 * std::max({p.l3_cache_bytes, p.l2_cache_bytes, p.l1_cache_bytes});
}

// Says on standard error what is being measured whenever 2 s pass without a line (a result
// counts as one: bench prints a row for each), so that a long run never looks hung.
class Watch {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Watch(std::string label) : label_(std::move(label)) {
    if (!label_.empty()) thread_ = std::thread([this] { loop(); });
  }
  ~Watch() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void begin(std::string what) {
    std::lock_guard lock(mutex_);
    what_ = std::move(what);
  }
  void result() {
    std::lock_guard lock(mutex_);
    ++results_;
    last_ = Clock::now();
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    while (!wake_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stop_; })) {
      const auto now = Clock::now();
      if (now - last_ < std::chrono::seconds(2)) continue;
      std::fprintf(stderr, "%s: measuring %s (%zu results so far, %.0f s)\n", label_.c_str(), what_.c_str(), results_,
                   std::chrono::duration<double>(now - start_).count());
      std::fflush(stderr);
      last_ = now;
    }
  }
  std::string label_, what_ = "setup";
  std::size_t results_ = 0;
  const Clock::time_point start_ = Clock::now();
  Clock::time_point last_ = start_;
  bool stop_ = false;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread thread_;
};

}  // namespace

void warm_up(Backend& be) {
  // A quarter second of adds (4 Mi floats; 64 Ki on the slow backends): thread pools, idle cores
  // and GPU clocks wake before anything is measured. On the 2-vCPU development VM the first
  // parallel regions of a process otherwise took ~8 ms each.
  const DeviceProperties props = be.properties();
  const bool slow = be.name() == "reference" || props.kind == BackendKind::simulator;
  const std::size_t n = slow ? (std::size_t(1) << 16) : (std::size_t(1) << 22);
  Buffer a(be, DType::f32, n), b(be, DType::f32, n), c(be, DType::f32, n);
  a.fill(1);
  b.fill(2);
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(250)) {
    add(a, b, c);
    be.synchronize(Queue{});
  }
}

const std::vector<std::string>& algorithm_names() {
  static const std::vector<std::string> names = {"add", "axpy", "sum", "dot", "scan", "softmax", "matmul"};
  return names;
}

std::vector<Result> run(const Options& o, const std::function<void(const Result&)>& progress) {
  std::vector<std::string> names = o.backends;
  if (names.empty()) {
    for (const auto& info : backends()) {
      if (!info.available || info.name == "reference") continue;
      if (get_backend(info.name).properties().kind == BackendKind::simulator) continue;
      names.push_back(info.name);
    }
  }
  std::vector<std::string> algorithms = o.algorithms.empty() ? algorithm_names() : o.algorithms;
  for (const std::string& a : algorithms) {
    if (std::find(algorithm_names().begin(), algorithm_names().end(), a) == algorithm_names().end()) {
      throw InvalidArgument("unknown algorithm '" + a + "': use add, axpy, sum, dot, scan, softmax or matmul");
    }
  }
  std::vector<Result> results;
  Watch watch(o.progress_label);
  for (const std::string& name : names) {
    Backend& be = get_backend(name);
    const DeviceProperties props = be.properties();
    const bool reference = name == "reference";
    watch.begin("the warm-up of " + name);
    warm_up(be);
    // Where a kernel's data would fit in the caches, each timed run starts cold (options.flush).
    // Not on the simulators and the reference: correctness tools, not timing models.
    const bool slow = reference || props.kind == BackendKind::simulator;
    const std::size_t evict = o.flush && !slow ? flush_bytes(props) : 0;
    const bool by_lines = kLineFlush && props.kind == BackendKind::cpu;
    Buffer flusher = evict > 0 && !by_lines ? Buffer(be, DType::f32, evict / sizeof(float)) : Buffer();
    for (const std::string& algorithm : algorithms) {
      for (std::size_t n : sizes(algorithm, o.full, props.kind, reference)) {
        const bool mm = algorithm == "matmul";
        const std::size_t elems = mm ? n * n : n;
        // Flushing matters where the operands (three arrays at most) fit in twice the last-level
        // cache.
        const bool fits = evict > 0 && 3 * 4 * elems < evict;
        const Cold cold{by_lines ? nullptr : &flusher, {}};
        const Cold* flush = fits ? &cold : nullptr;
        // A set-up's kernel starts cold the same way, its own operands flushed where by lines.
        const auto cold_of = [&](Setup& k) {
          Cold c = cold;
          if (by_lines) c.operands = {&k.keep[0], &k.keep[1], &k.keep[2]};
          return c;
        };
        const bool on_host = props.kind == BackendKind::cpu;  // the vendor BLAS: its own thread pool
        const std::string at = std::to_string(n).append(mm ? "^3" : " elements");
        watch.begin(std::string("the copy bandwidth on ").append(name).append(" at ").append(at));
        const double limit = copy_gbps(be, elems, o.min_seconds, flush);
        auto variants = variants_of(be, algorithm, o.variants);
        // With every tier swept, the vendor row goes first and is the peer of the others.
        const auto vendor_at = std::find(variants.begin(), variants.end(), "vendor");
        const bool vendor_row = vendor_at != variants.end();
        if (vendor_row) std::rotate(variants.begin(), vendor_at, vendor_at + 1);
        double vendor = 0;
        if (mm && !vendor_row) {
          const auto tiers = be.matmul_tiers(DType::f32);
          if (std::find(tiers.begin(), tiers.end(), MatmulTier::vendor) != tiers.end()) {
            const auto v = setup(be, algorithm, "vendor", n);
            const Cold vc = cold_of(*v);
            vendor = v->flops /
                     (time_kernel(be, v->kernel, o.min_seconds, fits ? &vc : nullptr, on_host).median_ms * 1e6);
          }
        }
        for (const std::string& variant : variants) {
          // The slow teaching tiers stop at 1024^3 (minutes per run beyond; the ladder shows there),
          // and at 256^3 unless --full (the quick default stays under a minute on 2 cores).
          if (mm && n > (o.full ? 1024u : 256u) && (variant == "naive" || variant == "tiled")) continue;
          std::string what = algorithm;  // built in steps: GCC 12 warns falsely (-Wrestrict) on one long +
          what.append(" on ").append(name);
          if (!variant.empty()) what.append(" (").append(variant).append(")");
          watch.begin(what.append(" at ").append(at));
          const auto owned = setup(be, algorithm, variant, n);
          Setup& s = *owned;
          Result r;
          r.algorithm = algorithm;
          r.backend = name;
          r.kind = name_of(props.kind);
          r.variant = variant.empty()
                          ? (mm ? name_of(resolve_matmul_tier(matrix(s.keep[0], std::int64_t(n), std::int64_t(n)),
                                                              matrix(s.keep[1], std::int64_t(n), std::int64_t(n)),
                                                              matrix(s.keep[2], std::int64_t(n), std::int64_t(n))))
                                : "default")
                          : variant;
          r.size = n;
          r.bytes = s.bytes;
          r.flops = s.flops;
          const Cold sc = cold_of(s);
          r.kernel = time_kernel(be, s.kernel, o.min_seconds, fits ? &sc : nullptr, on_host && variant == "vendor");
          r.flushed = flush != nullptr;
          r.e2e_pageable_ms = time_host(be, s.e2e_pageable);
          r.e2e_pinned_ms = time_host(be, s.e2e_pinned);
          check_same(s, s.pinned[2].span<float>(), "from pinned memory", algorithm, name, n);
          if (s.e2e_overlap) {
            r.e2e_overlap_ms = time_host(be, s.e2e_overlap);
            check_same(s, s.pinned[3].span<float>(), "overlapped on two queues", algorithm, name, n);
          }
          if (s.e2e_managed) {
            r.e2e_managed_ms = time_host(be, s.e2e_managed);
            check_same(s, s.managed_out, "through managed memory", algorithm, name, n);
          }
          r.limit_gbps = limit;
          if (variant == "vendor") vendor = r.gflops();
          r.vendor_gflops = vendor;
          results.push_back(r);
          if (progress) progress(r);
          watch.result();
          // Its end-to-end runs used OpenBLAS last: let its threads go idle before our tiers run.
          if (on_host && variant == "vendor") std::this_thread::sleep_for(kSettle);
        }
      }
    }
  }
  return results;
}

Json json(const std::vector<Result>& results, const std::string& command) {
  Json backends = Json::object();
  for (const Result& r : results) {
    if (!backends.contains(r.backend)) backends[r.backend] = get_backend(r.backend).properties().name;
  }
  // What was not measured (no overlapped or managed way, no flops, no vendor tier) is null, not 0.
  const auto measured = [](double v) { return v > 0 ? number(v) : Json(nullptr); };
  Json rows = Json::array();
  for (const Result& r : results) {
    rows.push_back({{"algorithm", r.algorithm},
                    {"backend", r.backend},
                    {"kind", r.kind},
                    {"variant", r.variant},
                    {"size", r.size},
                    {"bytes", r.bytes},
                    {"flops", r.flops},
                    {"kernel_ms", number(r.kernel.median_ms)},
                    {"kernel_min_ms", number(r.kernel.min_ms)},
                    {"kernel_max_ms", number(r.kernel.max_ms)},
                    {"reps", r.kernel.reps},
                    {"e2e_pageable_ms", number(r.e2e_pageable_ms)},
                    {"e2e_pinned_ms", number(r.e2e_pinned_ms)},
                    {"e2e_overlap_ms", measured(r.e2e_overlap_ms)},
                    {"e2e_managed_ms", measured(r.e2e_managed_ms)},
                    {"flushed", r.flushed},
                    {"gbps", number(r.gbps())},
                    {"gflops", measured(r.flops > 0 ? r.gflops() : 0)},
                    {"copy_gbps", number(r.limit_gbps)},
                    {"vendor_gflops", measured(r.vendor_gflops)}});
  }
  return Json{{"command", command}, {"date", today()}, {"backends", backends}, {"results", rows}};
}

double load_average() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : 0;
}

Noise assess_noise(const std::vector<Result>& results, double load_before, int cpus) {
  Noise n;
  n.load_average = load_before;
  n.cpus = cpus;
  for (const Result& r : results) {
    // Kernels of microseconds jitter by nature (a cold cache line, a timer tick): not counted.
    if (r.kernel.reps < 3 || r.kernel.min_ms <= 0 || r.kernel.median_ms < 0.05) continue;
    ++n.timed_rows;
    n.spread_rows += r.kernel.median_ms > 1.5 * r.kernel.min_ms;
  }
  char why[256] = "";
  if (cpus > 0 && load_before > 0.75 * cpus) {
    std::snprintf(why, sizeof why, "the load average was %.2f on %d CPUs before the run (other work was running)",
                  load_before, cpus);
  } else if (n.timed_rows > 0 && 4 * n.spread_rows > n.timed_rows) {
    std::snprintf(why, sizeof why,
                  "in %zu of %zu results the median kernel time is over 50%% above the fastest run (the machine is "
                  "busy or its clock varies)",
                  n.spread_rows, n.timed_rows);
  }
  n.why = why;
  n.noisy = !n.why.empty();
  return n;
}

std::string csv(const std::vector<Result>& results) {
  std::string out =
      "algorithm,backend,kind,variant,size,bytes,flops,kernel_ms,kernel_min_ms,kernel_max_ms,e2e_pageable_ms,"
      "e2e_pinned_ms,e2e_overlap_ms,e2e_managed_ms,flushed,gbps,gflops,copy_gbps,vendor_gflops\n";
  char line[512];
  // An empty field where nothing was measured (the JSON's null).
  const auto field = [](double v) {
    char text[32] = "";
    if (v > 0) std::snprintf(text, sizeof text, "%.6g", v);
    return std::string(text);
  };
  for (const Result& r : results) {
    std::snprintf(line, sizeof line, "%s,%s,%s,%s,%zu,%.0f,%.0f,%.6g,%.6g,%.6g,%.6g,%.6g,%s,%s,%s,%.6g,%s,%.6g,%s\n",
                  r.algorithm.c_str(), r.backend.c_str(), r.kind.c_str(), r.variant.c_str(), r.size, r.bytes, r.flops,
                  r.kernel.median_ms, r.kernel.min_ms, r.kernel.max_ms, r.e2e_pageable_ms, r.e2e_pinned_ms,
                  field(r.e2e_overlap_ms).c_str(), field(r.e2e_managed_ms).c_str(), r.flushed ? "true" : "false",
                  r.gbps(), field(r.flops > 0 ? r.gflops() : 0).c_str(), r.limit_gbps, field(r.vendor_gflops).c_str());
    out += line;
  }
  return out;
}

}  // namespace tandem::cli::sweep
