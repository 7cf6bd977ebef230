// Host/device qualifiers shared by code that GPU compilers also see. TANDEM_GPU_COMPILER is set
// under nvcc (CUDA) and clang -x hip / hipcc (HIP); TANDEM_HIP under the latter.
#pragma once

#if defined(__HIP__) || defined(__HIPCC__)
#include <hip/hip_runtime.h>
#define TANDEM_HIP 1
#endif

#if defined(__CUDACC__) || defined(TANDEM_HIP)
#define TANDEM_GPU_COMPILER 1
#define TANDEM_HOST_DEVICE __host__ __device__
#else
#define TANDEM_HOST_DEVICE
#endif

// Code compiled by more than one of nvcc, clang-HIP and the host compiler into one library
// (kernels, their host-side launch stubs, the GPU runtime layer) lives in an inline namespace
// per compiler, so the linker never merges the CUDA, HIP and simulator copies.
#if defined(__CUDACC__)
#define TANDEM_GPU_ABI abi_cuda
#elif defined(TANDEM_HIP)
#define TANDEM_GPU_ABI abi_hip
#else
#define TANDEM_GPU_ABI abi_sim
#endif
