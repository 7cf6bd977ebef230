// The runtime layer of GpuBackend over a real GPU: the CUDA runtime API under nvcc, the HIP
// runtime API under clang -x hip. One source; the few names that differ are mapped in `api`.
// Compiled only by a GPU compiler (backends/cuda/cuda_backend.cu, backends/hip/hip_backend.hip).
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tandem/detail/portability.hpp"
#include "tandem/device.hpp"
#include "tandem/errors.hpp"
#include "tandem/gpu/types.hpp"

#if defined(TANDEM_HIP)
#include <hip/hip_runtime.h>
#else
#include <cuda_runtime.h>
#endif

namespace tandem::gpu {
inline namespace TANDEM_GPU_ABI {

namespace api {
#if defined(TANDEM_HIP)
inline constexpr const char* platform = "HIP";
using error_t = hipError_t;
using stream_t = hipStream_t;
using event_t = hipEvent_t;
using props_t = hipDeviceProp_t;
inline constexpr error_t success = hipSuccess;
inline const char* error_name(error_t e) { return hipGetErrorName(e); }
inline const char* error_string(error_t e) { return hipGetErrorString(e); }
inline error_t last_error() { return hipGetLastError(); }
inline error_t device_count(int* n) { return hipGetDeviceCount(n); }
inline error_t set_device(int d) { return hipSetDevice(d); }
inline error_t properties(props_t* p, int d) { return hipGetDeviceProperties(p, d); }
inline error_t malloc(void** p, std::size_t bytes) { return hipMalloc(p, bytes); }
inline error_t free(void* p) { return hipFree(p); }
inline error_t host_alloc(void** p, std::size_t bytes) { return hipHostMalloc(p, bytes, hipHostMallocDefault); }
inline error_t host_free(void* p) { return hipHostFree(p); }
inline error_t managed_alloc(void** p, std::size_t bytes) { return hipMallocManaged(p, bytes, hipMemAttachGlobal); }
inline error_t mem_info(std::size_t* free_bytes, std::size_t* total) { return hipMemGetInfo(free_bytes, total); }
inline error_t copy(void* dst, const void* src, std::size_t bytes, stream_t s) {
  return hipMemcpyAsync(dst, src, bytes, hipMemcpyDefault, s);
}
inline error_t memset(void* p, int v, std::size_t bytes, stream_t s) { return hipMemsetAsync(p, v, bytes, s); }
inline error_t stream_create(stream_t* s) { return hipStreamCreateWithFlags(s, hipStreamNonBlocking); }
inline error_t stream_destroy(stream_t s) { return hipStreamDestroy(s); }
inline error_t stream_synchronize(stream_t s) { return hipStreamSynchronize(s); }
inline error_t event_create(event_t* e) { return hipEventCreate(e); }
inline error_t event_record(event_t e, stream_t s) { return hipEventRecord(e, s); }
inline error_t event_synchronize(event_t e) { return hipEventSynchronize(e); }
inline error_t stream_wait_event(stream_t s, event_t e) { return hipStreamWaitEvent(s, e, 0); }
inline error_t event_elapsed(float* ms, event_t a, event_t b) { return hipEventElapsedTime(ms, a, b); }
inline error_t event_destroy(event_t e) { return hipEventDestroy(e); }
inline error_t launch(const void* f, Dim3 g, Dim3 b, void** args, std::size_t smem, stream_t s) {
  return hipLaunchKernel(f, dim3(g.x, g.y, g.z), dim3(b.x, b.y, b.z), args, smem, s);
}
inline std::string architecture(const props_t& p) { return p.gcnArchName; }
inline std::string capability(const props_t& p) { return p.gcnArchName; }
inline std::size_t shared_per_multiprocessor(const props_t& p) { return p.maxSharedMemoryPerMultiProcessor; }
// Peak clocks in kHz (0 when the runtime cannot say).
inline int memory_clock_khz(int d) {
  int v = 0;
  return hipDeviceGetAttribute(&v, hipDeviceAttributeMemoryClockRate, d) == hipSuccess ? v : 0;
}
inline int clock_khz(int d) {
  int v = 0;
  return hipDeviceGetAttribute(&v, hipDeviceAttributeClockRate, d) == hipSuccess ? v : 0;
}
#else
inline constexpr const char* platform = "CUDA";
using error_t = cudaError_t;
using stream_t = cudaStream_t;
using event_t = cudaEvent_t;
using props_t = cudaDeviceProp;
inline constexpr error_t success = cudaSuccess;
inline const char* error_name(error_t e) { return cudaGetErrorName(e); }
inline const char* error_string(error_t e) { return cudaGetErrorString(e); }
inline error_t last_error() { return cudaGetLastError(); }
inline error_t device_count(int* n) { return cudaGetDeviceCount(n); }
inline error_t set_device(int d) { return cudaSetDevice(d); }
inline error_t properties(props_t* p, int d) { return cudaGetDeviceProperties(p, d); }
inline error_t malloc(void** p, std::size_t bytes) { return cudaMalloc(p, bytes); }
inline error_t free(void* p) { return cudaFree(p); }
inline error_t host_alloc(void** p, std::size_t bytes) { return cudaHostAlloc(p, bytes, cudaHostAllocDefault); }
inline error_t host_free(void* p) { return cudaFreeHost(p); }
inline error_t managed_alloc(void** p, std::size_t bytes) { return cudaMallocManaged(p, bytes, cudaMemAttachGlobal); }
inline error_t mem_info(std::size_t* free_bytes, std::size_t* total) { return cudaMemGetInfo(free_bytes, total); }
inline error_t copy(void* dst, const void* src, std::size_t bytes, stream_t s) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
}
inline error_t memset(void* p, int v, std::size_t bytes, stream_t s) { return cudaMemsetAsync(p, v, bytes, s); }
inline error_t stream_create(stream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking); }
inline error_t stream_destroy(stream_t s) { return cudaStreamDestroy(s); }
inline error_t stream_synchronize(stream_t s) { return cudaStreamSynchronize(s); }
inline error_t event_create(event_t* e) { return cudaEventCreate(e); }
inline error_t event_record(event_t e, stream_t s) { return cudaEventRecord(e, s); }
inline error_t event_synchronize(event_t e) { return cudaEventSynchronize(e); }
inline error_t stream_wait_event(stream_t s, event_t e) { return cudaStreamWaitEvent(s, e, 0); }
inline error_t event_elapsed(float* ms, event_t a, event_t b) { return cudaEventElapsedTime(ms, a, b); }
inline error_t event_destroy(event_t e) { return cudaEventDestroy(e); }
inline error_t launch(const void* f, Dim3 g, Dim3 b, void** args, std::size_t smem, stream_t s) {
  return cudaLaunchKernel(f, dim3(g.x, g.y, g.z), dim3(b.x, b.y, b.z), args, smem, s);
}
inline std::string architecture(const props_t& p) { return "sm_" + std::to_string(p.major * 10 + p.minor); }
inline std::string capability(const props_t& p) { return std::to_string(p.major) + "." + std::to_string(p.minor); }
inline std::size_t shared_per_multiprocessor(const props_t& p) { return p.sharedMemPerMultiprocessor; }
// Peak clocks in kHz (0 when the runtime cannot say; CUDA 13 keeps them out of cudaDeviceProp).
inline int memory_clock_khz(int d) {
  int v = 0;
  return cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, d) == cudaSuccess ? v : 0;
}
inline int clock_khz(int d) {
  int v = 0;
  return cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, d) == cudaSuccess ? v : 0;
}
#endif

// Throws DeviceError with the runtime's text when e is not success.
inline void check(error_t e, const std::string& what) {
  if (e == success) return;
  (void)last_error();  // clear the error so the next call starts clean
  throw DeviceError(std::string(platform) + " error in " + what + ": " + error_name(e) + " (" + error_string(e) + ")");
}
}  // namespace api

// Devices usable here; 0 with the reason when none (no driver, no device).
inline int device_count(std::string& reason) {
  int n = 0;  // not written on failure
  const api::error_t e = api::device_count(&n);
  if (e != api::success) {
    (void)api::last_error();
    reason = std::string("no usable ") + api::platform + " device: " + api::error_name(e) + " (" +
             api::error_string(e) + ")";
    return 0;
  }
  if (n == 0) reason = std::string("the ") + api::platform + " runtime found no device";
  return n;
}

class DeviceRuntime {
 public:
  explicit DeviceRuntime(int device) : device_(device) {
    select();
    api::check(api::properties(&props_, device_), "reading the device's properties");
    memory_clock_khz_ = api::memory_clock_khz(device_);
    clock_khz_ = api::clock_khz(device_);
    (void)api::last_error();
    streams_[0] = nullptr;  // queue 0: the default stream
  }
  ~DeviceRuntime() {
    (void)api::set_device(device_);
    for (int i = 1; i < streams(); ++i) (void)api::stream_destroy(streams_[static_cast<std::size_t>(i)]);
  }
  DeviceRuntime(const DeviceRuntime&) = delete;
  DeviceRuntime& operator=(const DeviceRuntime&) = delete;

  void* allocate(std::size_t bytes) {
    select();
    void* p = nullptr;
    if (api::malloc(&p, bytes) != api::success) {
      (void)api::last_error();
      return nullptr;  // the caching allocator frees its cache, retries, then raises OutOfMemory
    }
    return p;
  }
  // Never throws: it runs from noexcept paths (deallocate, shutdown), also after a device error.
  void release(void* p) noexcept {
    (void)api::set_device(device_);
    (void)api::free(p);
  }
  void set_requested(void*, std::size_t) noexcept {}
  // Page-locked host memory, so that copies from it run asynchronously at full link speed.
  void* host_allocate(std::size_t bytes, bool& pinned) {
    select();
    void* p = nullptr;
    if (api::host_alloc(&p, bytes) != api::success) {
      (void)api::last_error();
      return nullptr;
    }
    pinned = true;
    return p;
  }
  void host_release(void* p) noexcept { (void)api::host_free(p); }
  // Managed memory, where the device and driver support it (deviceQuery's "managed memory").
  bool has_managed() const { return props_.managedMemory != 0; }
#if defined(TANDEM_HIP)
  MemoryPlace memory_place() const { return {MemoryPlace::Kind::rocm, device_}; }
#else
  MemoryPlace memory_place() const { return {MemoryPlace::Kind::cuda, device_}; }
#endif
  void* managed_allocate(std::size_t bytes) {
    select();
    void* p = nullptr;
    if (api::managed_alloc(&p, bytes) != api::success) {
      (void)api::last_error();
      return nullptr;
    }
    return p;
  }
  void managed_release(void* p) noexcept { release(p); }
  std::size_t free_bytes() const {  // 0 when the runtime cannot say (it is called in error messages)
    (void)api::set_device(device_);
    std::size_t free_bytes = 0, total = 0;
    (void)api::mem_info(&free_bytes, &total);
    return free_bytes;
  }

  DeviceProperties properties() const {
    DeviceProperties p;
    p.name = props_.name;
    p.kind = BackendKind::gpu;
    p.memory_bytes = props_.totalGlobalMem;
    p.compute_units = props_.multiProcessorCount;
    p.simd_width = props_.warpSize;
    p.shared_memory_per_block = props_.sharedMemPerBlock;
    p.l2_cache_bytes = static_cast<std::size_t>(props_.l2CacheSize);
    p.shared_memory_per_multiprocessor = api::shared_per_multiprocessor(props_);
    p.clock_mhz = clock_khz_ / 1000;
    p.memory_clock_mhz = memory_clock_khz_ / 1000;
    p.memory_bus_width_bits = props_.memoryBusWidth;
    // As deviceQuery: two transfers per memory clock (DDR) over the whole bus.
    p.memory_bandwidth_gbs = 2.0 * double(memory_clock_khz_) * 1e3 * (props_.memoryBusWidth / 8.0) / 1e9;
    p.compute_capability = api::capability(props_);
    p.isa_features = {api::architecture(props_)};
    return p;
  }
  unsigned max_blocks() const { return static_cast<unsigned>(props_.multiProcessorCount) * 8; }

  // Queues live in a fixed table, so threads that use one while another is created never see
  // the table move.
  int create_stream() {
    std::lock_guard lock(streams_mutex_);
    const int id = count_.load();
    if (static_cast<std::size_t>(id) >= streams_.size()) {
      throw InvalidArgument("create_queue: at most " + std::to_string(streams_.size() - 1) + " queues per backend");
    }
    select();
    api::stream_t s = nullptr;
    api::check(api::stream_create(&s), "creating a stream");
    streams_[static_cast<std::size_t>(id)] = s;
    count_.store(id + 1);
    return id;
  }
  int streams() const { return count_.load(); }
  // The runtime's stream behind a queue, for vendor libraries (cuBLAS) that take one.
  api::stream_t native_stream(int id) const { return streams_[static_cast<std::size_t>(id)]; }
  void make_current() const { select(); }
  // For destructors: false where the device cannot be selected (the runtime unloading at exit).
  bool try_make_current() const noexcept { return api::set_device(device_) == api::success; }
  void check_stream(int id) const {
    if (id < 0 || id >= count_.load()) {
      throw InvalidArgument("queue " + std::to_string(id) + " was not created by this backend (create_queue)");
    }
  }
  void synchronize(int stream) {
    select();
    api::check(api::stream_synchronize(streams_[static_cast<std::size_t>(stream)]),
               "waiting for queue " + std::to_string(stream));
  }
  void copy(int stream, void* dst, const void* src, std::size_t bytes) {
    select();
    api::check(api::copy(dst, src, bytes, streams_[static_cast<std::size_t>(stream)]),
               "a copy of " + std::to_string(bytes) + " bytes");
  }
  void memset(int stream, void* p, int value, std::size_t bytes) {
    select();
    api::check(api::memset(p, value, bytes, streams_[static_cast<std::size_t>(stream)]), "memset");
  }

  struct DeviceEvent : Event::Impl {
    api::event_t event = nullptr;
    ~DeviceEvent() override {
      if (event != nullptr) (void)api::event_destroy(event);
    }
  };
  std::shared_ptr<Event::Impl> record(int stream) {
    select();
    auto e = std::make_shared<DeviceEvent>();
    api::check(api::event_create(&e->event), "creating an event");
    api::check(api::event_record(e->event, streams_[static_cast<std::size_t>(stream)]), "recording an event");
    return e;
  }
  double elapsed_ms(Event::Impl* a, Event::Impl* b) {
    auto* x = dynamic_cast<DeviceEvent*>(a);
    auto* y = dynamic_cast<DeviceEvent*>(b);
    if (x == nullptr || y == nullptr) throw InvalidArgument("elapsed_ms: events of another backend");
    api::check(api::event_synchronize(x->event), "waiting for an event");
    api::check(api::event_synchronize(y->event), "waiting for an event");
    float ms = 0;
    api::check(api::event_elapsed(&ms, x->event, y->event), "reading the time between events");
    return ms;
  }

  void wait_event(int stream, Event::Impl* e) {
    auto* x = dynamic_cast<DeviceEvent*>(e);
    if (x == nullptr) throw InvalidArgument("wait_event: an event of another backend");
    select();
    api::check(api::stream_wait_event(streams_[static_cast<std::size_t>(stream)], x->event),
               "making a queue wait for an event");
  }
  void synchronize_event(Event::Impl* e) {
    auto* x = dynamic_cast<DeviceEvent*>(e);
    if (x == nullptr) throw InvalidArgument("synchronize_event: an event of another backend");
    api::check(api::event_synchronize(x->event), "waiting for an event");
  }

#if !defined(TANDEM_HIP)
  // CUDA graphs: stream capture (relaxed: the caching allocator may still call cudaMalloc), one
  // instantiation, replays as single launches.
  void begin_capture(int stream) {
    select();
    api::check(cudaStreamBeginCapture(streams_[static_cast<std::size_t>(stream)], cudaStreamCaptureModeRelaxed),
               "starting a capture");
  }
  void abort_capture(int stream) noexcept {
    cudaGraph_t g = nullptr;
    (void)cudaStreamEndCapture(streams_[static_cast<std::size_t>(stream)], &g);
    if (g != nullptr) (void)cudaGraphDestroy(g);
    (void)cudaGetLastError();
  }
  void* end_capture(int stream) {
    cudaGraph_t g = nullptr;
    api::check(cudaStreamEndCapture(streams_[static_cast<std::size_t>(stream)], &g),
               "ending a capture (an op in it waited for the host: a synchronous copy, a download, or "
               "profiling with TANDEM_PROFILE)");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
    (void)cudaGraphDestroy(g);
    api::check(e, "instantiating a captured graph");
    return exec;
  }
  void launch_graph(void* exec, int stream) {
    select();
    api::check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), streams_[static_cast<std::size_t>(stream)]),
               "replaying a graph");
  }
  void destroy_graph(void* exec) noexcept {
    (void)api::set_device(device_);
    (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
  }
#endif

  template <class... P, class... A>
  void launch(int stream, const LaunchConfig& config, void (*kernel)(P...), A&&... args) {
    std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
    launch_tuple(stream, config, reinterpret_cast<const void*>(kernel), params, std::index_sequence_for<P...>{});
  }

 private:
  void select() const { api::check(api::set_device(device_), "selecting device " + std::to_string(device_)); }

  template <class Tuple, std::size_t... I>
  void launch_tuple(int stream, const LaunchConfig& c, const void* kernel, Tuple& params, std::index_sequence<I...>) {
    void* argv[] = {static_cast<void*>(&std::get<I>(params))..., nullptr};
    select();
#if !defined(TANDEM_HIP)
    if (c.large_shared) {
      api::check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(c.dynamic_shared_bytes)),
                 std::string("opting kernel '") + c.kernel + "' in to " + std::to_string(c.dynamic_shared_bytes) +
                     " bytes of shared memory");
    }
#endif
    const api::error_t e =
        api::launch(kernel, c.grid, c.block, argv, c.dynamic_shared_bytes, streams_[static_cast<std::size_t>(stream)]);
    if (e != api::success) {
      (void)api::last_error();
      throw DeviceError(std::string(api::platform) + " launch of kernel '" + c.kernel +
                        "' failed: " + api::error_name(e) + " (" + api::error_string(e) + ")");
    }
  }

  int device_;
  api::props_t props_{};
  int memory_clock_khz_ = 0, clock_khz_ = 0;
  std::array<api::stream_t, 64> streams_{};
  std::atomic<int> count_{1};
  std::mutex streams_mutex_;
};

}  // namespace TANDEM_GPU_ABI
}  // namespace tandem::gpu
