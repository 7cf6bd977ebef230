#!/usr/bin/env bash
# README command 2: the whole test suite, as CI runs it.
#   1. Release build of everything with warnings as errors; every CTest test (the matrix runs on
#      every backend built here, the rest report Skipped with the reason).
#   2. AddressSanitizer + UndefinedBehaviorSanitizer build; the CPU tests again under them.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
bash ci/install-deps.sh
jobs=$(nproc)

echo "== release build, warnings as errors =="
# Every backend whose toolchain is here must build: the simulator, HIP, Kokkos and MPI always
# (install-deps installs them), CUDA when nvcc is present. ON makes a missing toolchain a configure error
# instead of a silent skip.
gpu_flags=(-DTANDEM_ENABLE_SIM=ON -DTANDEM_ENABLE_HIP=ON -DTANDEM_ENABLE_KOKKOS=ON -DTANDEM_ENABLE_MPI=ON)
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  gpu_flags+=(-DTANDEM_ENABLE_CUDA=ON)
else
  echo "test.sh: no nvcc on this machine: the CUDA backend is not compiled"
fi
cmake --preset ci "${gpu_flags[@]}" >/dev/null
cmake --build --preset ci -j "$jobs"
ctest --preset ci -j "$jobs"

echo "== openmp sources without SSE2 (the fallbacks non-x86 CPUs compile), syntax only =="
for f in backends/openmp/scan.cpp backends/openmp/elementwise.cpp backends/openmp/reduce.cpp; do
  c++ -std=c++20 -fopenmp -fsyntax-only -U__SSE2__ -Iinclude -I. -Wall -Wextra -Werror "$f"
done

echo "== tandem::dist without MPI (the GPU machine's build, and users without Open MPI), syntax only =="
for f in algorithms/dist/*.cpp; do
  c++ -std=c++20 -fsyntax-only -Iinclude -Wall -Wextra -Wpedantic -Wshadow -Werror "$f"
done

echo "== AddressSanitizer + UndefinedBehaviorSanitizer =="
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$jobs"

echo "test.sh: all passed in $(( $(date +%s) - start )) s"
