// Kernels of your own, written once against tandem/gpu/kernel_api.hpp, run on every backend
// (docs/kernels.md).
//
// In any source, tandem::launch(backend, config, kernel, args...) runs a kernel on the backends
// the compiler of that source can reach: the host compiler's on the backends whose memory is the
// host's (openmp: blocks spread over its team, a block's threads as fibers so that barriers and
// warp exchanges keep their meaning; sim and sim64: the simulator with all its checks; reference:
// one thread), nvcc's on cuda, clang -x hip's on hip. parallel_for and parallel_reduce do the same
// for a loop body that needs no shared memory and no barriers.
//
// One source for every backend: put the kernels and the functions that launch them in a kernels
// file (their names in an unnamed namespace), export each function that takes the Backend first
// with TANDEM_EXPORT(name), and let CMake compile the file once per kind of backend:
//   tandem_add_kernels(my_program SOURCES saxpy.cpp BACKENDS openmp sim cuda hip)
// Where it is called, TANDEM_IMPORT(name, signature) declares it; the call runs the compilation
// for the backend given as its first argument, or throws InvalidArgument naming what to add.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "tandem/backend.hpp"
#include "tandem/buffer.hpp"
#include "tandem/errors.hpp"
#include "tandem/gpu/kernel_api.hpp"

// Kernels of one's own get internal linkage: a kernels file is compiled by several compilers into
// one program, where a kernel template with linkage would be merged across them (the linker keeps
// one compiler's and calls it from the others).
#undef TANDEM_KERNEL
#if defined(TANDEM_GPU_COMPILER)
#define TANDEM_KERNEL static __global__
#else
#define TANDEM_KERNEL static
#endif

// A loop body for parallel_for / parallel_reduce that every compiler can run where it runs loops
// (nvcc needs --extended-lambda for it; tandem_add_kernels passes it).
#if defined(TANDEM_GPU_COMPILER)
#define TANDEM_LAMBDA [=] __host__ __device__
#else
#define TANDEM_LAMBDA [=]
#endif

namespace tandem {

// The kinds of compilation a kernels file gets: the host compiler, nvcc, clang -x hip.
enum class KernelTarget : unsigned char { host, cuda, hip };
std::string_view name_of(KernelTarget target);
// The compilation that runs work on `backend` (host memory: host; a CUDA device: cuda; a ROCm
// device: hip); InvalidArgument for a backend whose memory tandem cannot name (Kokkos' GPU spaces).
KernelTarget kernel_target(const Backend& backend);

// What follows differs by compiler, and a program links the host's, nvcc's and clang-HIP's
// compilations together: each lives in its compiler's inline namespace, so that the linker never
// takes one compiler's launch for another's (the same instantiation of launch<...> otherwise).
inline namespace TANDEM_GPU_ABI {

// The compilation of this source.
#if defined(TANDEM_HIP)
inline constexpr KernelTarget kThisKernelTarget = KernelTarget::hip;
#elif defined(TANDEM_GPU_COMPILER)
inline constexpr KernelTarget kThisKernelTarget = KernelTarget::cuda;
#else
inline constexpr KernelTarget kThisKernelTarget = KernelTarget::host;
#endif

}  // namespace TANDEM_GPU_ABI

// combine(a, b) for parallel_reduce: the sum (the default), the smaller, the larger.
struct Plus {
  template <class T>
  TANDEM_HOST_DEVICE constexpr T operator()(const T& a, const T& b) const {
    return a + b;
  }
};
struct Min {
  template <class T>
  TANDEM_HOST_DEVICE constexpr T operator()(const T& a, const T& b) const {
    return b < a ? b : a;
  }
};
struct Max {
  template <class T>
  TANDEM_HOST_DEVICE constexpr T operator()(const T& a, const T& b) const {
    return a < b ? b : a;
  }
};

namespace detail {

// Throws InvalidArgument unless this source's compilation runs work on `backend`.
void check_kernel_target(const Backend& backend, KernelTarget compiled, const char* what);
// The items of one parallel_reduce chunk on the host: its partial results come out in chunk order,
// so a reduction gives the same result on every run and team size.
inline constexpr std::size_t kReduceChunk = 4096;

}  // namespace detail

inline namespace TANDEM_GPU_ABI {
namespace kernel_detail {

#if defined(TANDEM_GPU_COMPILER)
#if defined(TANDEM_HIP)
#define TANDEM_KERNELS_API(name) hip##name
using NativeStream = hipStream_t;
using NativeError = hipError_t;
#else
#define TANDEM_KERNELS_API(name) cuda##name
using NativeStream = cudaStream_t;
using NativeError = cudaError_t;
#endif

// Throws DeviceError naming the kernel when the runtime reports an error.
inline void check_native(NativeError e, const char* kernel, const char* step) {
  if (e == TANDEM_KERNELS_API(Success)) return;
  (void)TANDEM_KERNELS_API(GetLastError)();  // cleared, so the next call does not report it again
  throw DeviceError(std::string(step) + " of kernel '" + kernel + "' on " + std::string(name_of(kThisKernelTarget)) +
                    ": " + TANDEM_KERNELS_API(GetErrorName)(e) + " (" + TANDEM_KERNELS_API(GetErrorString)(e) + ")");
}

// The backend's device made current for a launch, the caller's restored after it.
class DeviceScope {
 public:
  DeviceScope(Backend& backend, const char* kernel) {
    check_native(TANDEM_KERNELS_API(GetDevice)(&previous_), kernel, "launch");
    check_native(TANDEM_KERNELS_API(SetDevice)(backend.memory_place().device), kernel, "launch");
  }
  ~DeviceScope() { (void)TANDEM_KERNELS_API(SetDevice)(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

template <class F>
__global__ void parallel_for_kernel(std::size_t n, F body) {
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) body(i);
}

inline constexpr unsigned kReduceBlock = 256;
template <class T, class F, class C>
__global__ void parallel_reduce_kernel(std::size_t n, T identity, F body, C combine, T* partials) {
  // Raw storage: a T with default member initialisers cannot be __shared__.
  alignas(T) __shared__ unsigned char storage[sizeof(T) * kReduceBlock];
  T* part = reinterpret_cast<T*>(storage);
  T acc = identity;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    acc = combine(acc, body(i));
  part[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned s = kReduceBlock / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) part[threadIdx.x] = combine(part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = part[0];
}

inline unsigned grid_for(std::size_t n, unsigned block, std::size_t most) {
  const std::size_t blocks = (n + block - 1) / block;
  return static_cast<unsigned>(blocks < most ? (blocks == 0 ? 1 : blocks) : most);
}
#endif

}  // namespace kernel_detail

// Runs kernel(args...) over config's grid and blocks on backend's default queue. The arguments
// are converted to the kernel's parameter types once; pass device pointers (Buffer::data()).
// Host backends run the launch before returning; cuda and hip queue it (synchronize as after
// any op). Throws InvalidArgument when this source's compiler cannot reach the backend, and
// DeviceError for a launch the device refuses (or, on sim, a failed check).
template <class... P, class... A>
void launch(Backend& backend, const gpu::LaunchConfig& config, void (*kernel)(P...), A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "tandem::launch: wrong number of kernel arguments");
  ::tandem::detail::check_kernel_target(backend, kThisKernelTarget, config.kernel);
#if defined(TANDEM_GPU_COMPILER)
  const kernel_detail::DeviceScope device(backend, config.kernel);
  const dim3 grid(config.grid.x, config.grid.y, config.grid.z), block(config.block.x, config.block.y, config.block.z);
  if (config.large_shared) {
    kernel_detail::check_native(
        TANDEM_KERNELS_API(FuncSetAttribute)(reinterpret_cast<const void*>(kernel),
                                             TANDEM_KERNELS_API(FuncAttributeMaxDynamicSharedMemorySize),
                                             static_cast<int>(config.dynamic_shared_bytes)),
        config.kernel, "opt-in to large shared memory");
  }
  kernel<<<grid, block, config.dynamic_shared_bytes,
           static_cast<kernel_detail::NativeStream>(backend.native_queue(Queue{}))>>>(
      static_cast<P>(std::forward<A>(args))...);
  kernel_detail::check_native(TANDEM_KERNELS_API(GetLastError)(), config.kernel, "launch");
#else
  const std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
  sim::run_on_host(backend, config, [&] { std::apply(kernel, params); });
#endif
}

// body(i) for every i in [0, n), in parallel and in no promised order, on backend: the openmp
// team in chunks, one thread on the other host backends, a grid-stride kernel on cuda and hip.
// Make the body with TANDEM_LAMBDA; it captures by value (device pointers, scalars).
template <class F>
void parallel_for(Backend& backend, std::size_t n, F body) {
  ::tandem::detail::check_kernel_target(backend, kThisKernelTarget, "parallel_for");
  if (n == 0) return;
#if defined(TANDEM_GPU_COMPILER)
  const kernel_detail::DeviceScope device(backend, "parallel_for");
  constexpr unsigned block = 256;
  kernel_detail::parallel_for_kernel<<<kernel_detail::grid_for(n, block, std::size_t(1) << 20), block, 0,
                                       static_cast<kernel_detail::NativeStream>(backend.native_queue(Queue{}))>>>(n,
                                                                                                                  body);
  kernel_detail::check_native(TANDEM_KERNELS_API(GetLastError)(), "parallel_for", "launch");
#else
  backend.host_parallel(Queue{}, n, 1024, 0, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) body(i);
  });
#endif
}

// combine over i in [0, n) of body(i), starting from identity (which combine must leave
// unchanged): the sum by default, or tandem::Min / tandem::Max or a functor of your own,
// associative and commutative, since the backend chooses the grouping. T is a trivially copyable
// value type. The host backends group in fixed chunks, so a floating-point result is the same on
// every run and team size; cuda and hip wait for the result (it comes back to the host).
template <class T, class F, class C = Plus>
T parallel_reduce(Backend& backend, std::size_t n, T identity, F body, C combine = {}) {
  static_assert(std::is_trivially_copyable_v<T>, "parallel_reduce: T must be trivially copyable");
  ::tandem::detail::check_kernel_target(backend, kThisKernelTarget, "parallel_reduce");
  if (n == 0) return identity;
#if defined(TANDEM_GPU_COMPILER)
  const kernel_detail::DeviceScope device(backend, "parallel_reduce");
  const unsigned grid = kernel_detail::grid_for(n, kernel_detail::kReduceBlock, 1024);
  std::vector<T> partials(grid, identity);
  void* scratch = backend.allocate(sizeof(T) * grid);
  const auto stream = static_cast<kernel_detail::NativeStream>(backend.native_queue(Queue{}));
  struct Free {  // after the stream's work, which may still use it when a step below failed
    Backend& b;
    void* p;
    kernel_detail::NativeStream s;
    ~Free() {
      (void)TANDEM_KERNELS_API(StreamSynchronize)(s);
      b.deallocate(p);
    }
  } free_scratch{backend, scratch, stream};
  kernel_detail::parallel_reduce_kernel<<<grid, kernel_detail::kReduceBlock, 0, stream>>>(n, identity, body, combine,
                                                                                          static_cast<T*>(scratch));
  kernel_detail::check_native(TANDEM_KERNELS_API(GetLastError)(), "parallel_reduce", "launch");
  kernel_detail::check_native(TANDEM_KERNELS_API(MemcpyAsync)(partials.data(), scratch, sizeof(T) * grid,
                                                              TANDEM_KERNELS_API(MemcpyDeviceToHost), stream),
                              "parallel_reduce", "copying the partial results");
  kernel_detail::check_native(TANDEM_KERNELS_API(StreamSynchronize)(stream), "parallel_reduce", "running");
#else
  const std::size_t chunks = (n + ::tandem::detail::kReduceChunk - 1) / ::tandem::detail::kReduceChunk;
  std::vector<T> partials(chunks, identity);
  backend.host_parallel(Queue{}, chunks, 1, 0, [&](std::size_t begin, std::size_t end) {
    for (std::size_t c = begin; c < end; ++c) {
      T acc = identity;
      const std::size_t last = std::min(n, (c + 1) * ::tandem::detail::kReduceChunk);
      for (std::size_t i = c * ::tandem::detail::kReduceChunk; i < last; ++i) acc = combine(acc, body(i));
      partials[c] = acc;
    }
  });
#endif
  T result = identity;
  for (const T& p : partials) result = combine(result, p);
  return result;
}

}  // namespace TANDEM_GPU_ABI

namespace detail {

// What TANDEM_EXPORT leaves for TANDEM_IMPORT, one per function and compilation. It is made at
// compile time (constinit), so an import can be called from any static initializer. Its layout
// is the same whatever F is: the import reads it as its own signature's, and calls the function
// only when the two signatures are one type.
template <class F>
struct Export {
  const char* name;
  const std::type_info* signature;  // typeid(F)
  F* function;
};

// The exported functions of one name, by compilation (null where it was not linked in).
template <class Signature>
class Imported;
template <class R, class... A>
class Imported<R(Backend&, A...)> {
 public:
  using Entry = Export<R(Backend&, A...)>;
  constexpr Imported(const char* name, const Entry* host, const Entry* cuda, const Entry* hip)
      : name_(name), exports_{host, cuda, hip} {}

  R operator()(Backend& backend, A... args) const { return find(backend).function(backend, std::forward<A>(args)...); }
  // Whether this function was compiled for the backend's kind (as a call would find it).
  bool compiled_for(const Backend& backend) const {
    return exports_[static_cast<unsigned>(kernel_target(backend))] != nullptr;
  }

 private:
  const Entry& find(const Backend& backend) const {
    const KernelTarget target = kernel_target(backend);
    const Entry* e = exports_[static_cast<unsigned>(target)];
    if (e == nullptr) {
      throw InvalidArgument(std::string(name_) + " was not compiled for " + std::string(name_of(target)) +
                            " (backend '" + backend.name() +
                            "'): name the backend in tandem_add_kernels(... BACKENDS) " +
                            "for the file that exports it");
    }
    if (*e->signature != typeid(R(Backend&, A...))) {
      throw InvalidArgument(std::string(name_) +
                            " is imported with another signature than the one it was exported "
                            "with: make TANDEM_IMPORT's signature the function's type");
    }
    return *e;
  }

  const char* name_;
  const Entry* exports_[3];
};

}  // namespace detail
}  // namespace tandem

// clang-format off
#define TANDEM_EXPORT_NAME_(fn, abi) tandem_export_##fn##_##abi
#define TANDEM_EXPORT_NAME(fn, abi) TANDEM_EXPORT_NAME_(fn, abi)

// After the function `fn(tandem::Backend&, ...)` in a kernels file, at namespace scope outside any
// namespace: makes this compilation of it callable through TANDEM_IMPORT (visible from a shared
// library built with hidden visibility too). One function per name (no overloads).
// Not const (the import reads it as const): clang-HIP would copy a const constant into device
// memory, where the host function it points to does not exist.
#define TANDEM_EXPORT(fn)                                                                       \
  extern __attribute__((visibility("default"))) ::tandem::detail::Export<decltype(fn)>          \
      TANDEM_EXPORT_NAME(fn, TANDEM_GPU_ABI);                                                   \
  constinit ::tandem::detail::Export<decltype(fn)> TANDEM_EXPORT_NAME(fn, TANDEM_GPU_ABI)       \
      {#fn, &typeid(decltype(fn)), &fn}

// Where an exported function is called, at namespace scope outside any namespace: declares `fn`,
// called as the function is, with signature `R(tandem::Backend&, ...)`. tandem_add_kernels()
// defines TANDEM_KERNELS_HOST, _CUDA and _HIP for the kinds it compiled, on its target and those
// that link it: those compilations are referenced (so a static library's are linked in, and a
// missing one is a link error); the others are weak references, null when absent, and a call for
// their backends throws InvalidArgument.
#define TANDEM_IMPORT(fn, ...)                                                                  \
  extern const ::tandem::detail::Export<__VA_ARGS__> TANDEM_EXPORT_NAME(fn, abi_sim)            \
      TANDEM_KERNELS_REFERENCE_HOST;                                                            \
  extern const ::tandem::detail::Export<__VA_ARGS__> TANDEM_EXPORT_NAME(fn, abi_cuda)           \
      TANDEM_KERNELS_REFERENCE_CUDA;                                                            \
  extern const ::tandem::detail::Export<__VA_ARGS__> TANDEM_EXPORT_NAME(fn, abi_hip)            \
      TANDEM_KERNELS_REFERENCE_HIP;                                                             \
  inline constinit const ::tandem::detail::Imported<__VA_ARGS__> fn {                           \
    #fn, &TANDEM_EXPORT_NAME(fn, abi_sim), &TANDEM_EXPORT_NAME(fn, abi_cuda),                   \
        &TANDEM_EXPORT_NAME(fn, abi_hip)                                                        \
  }
#if defined(TANDEM_KERNELS_HOST)
#define TANDEM_KERNELS_REFERENCE_HOST
#else
#define TANDEM_KERNELS_REFERENCE_HOST __attribute__((weak))
#endif
#if defined(TANDEM_KERNELS_CUDA)
#define TANDEM_KERNELS_REFERENCE_CUDA
#else
#define TANDEM_KERNELS_REFERENCE_CUDA __attribute__((weak))
#endif
#if defined(TANDEM_KERNELS_HIP)
#define TANDEM_KERNELS_REFERENCE_HIP
#else
#define TANDEM_KERNELS_REFERENCE_HIP __attribute__((weak))
#endif
// clang-format on
