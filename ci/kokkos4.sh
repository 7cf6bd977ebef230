#!/usr/bin/env bash
# tandem against Kokkos 4.6.01 (OpenMP execution space), beside Debian's Kokkos 3.4:
#   1. Kokkos core from ../shared/deps/kokkos-4.6.01.tar.gz (checksum checked) built once into a
#      cache outside the source tree (KOKKOS4_CACHE, default ~/.cache/tandem/kokkos-4.6.01-openmp-shared),
#      reused when present. Shared libraries: a static Kokkos would be linked into both the
#      kokkos module and a program that uses Kokkos itself, two Kokkos instances that do not see
#      each other's initialize and finalize (the first run here failed the test that checks it);
#   2. tandem (CPU backends and kokkos, the tests) built against it in build/kokkos4;
#   3. the kokkos label of CTest and `tandem check --backend kokkos` there, and `tandem info` to
#      show the version and execution space.
# A stage of ci/test.sh (about 4 minutes on 2 cores with the cache, 30 s more to fill it).
# Without ../shared/deps (and no cache) it says so and exits 0: the stage is then SKIPPED, with
# the reason, and CI still tests Debian's Kokkos 3.4 in the main build.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
tarball=../shared/deps/kokkos-4.6.01.tar.gz
sha256=d8a8a5e15331c46b900d3f75d2b62b0b32f067b126a4a75d465224c899765084
prefix=${KOKKOS4_CACHE:-$HOME/.cache/tandem/kokkos-4.6.01-openmp-shared}

if [ ! -f "$prefix/.complete" ]; then
  if [ ! -f "$tarball" ]; then
    echo "kokkos4.sh: SKIPPED: $tarball (the Kokkos 4.6.01 source) is not beside this checkout, and no build of it is cached in $prefix"
    exit 0
  fi
  echo "$sha256  $tarball" | sha256sum -c --quiet - || { echo "kokkos4.sh: $tarball: wrong checksum" >&2; exit 1; }
  start=$(date +%s)
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  tar xzf "$tarball" -C "$work"
  cmake -S "$work/kokkos-4.6.01" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKokkos_ENABLE_OPENMP=ON \
    -DKokkos_ENABLE_SERIAL=ON -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
  cmake --build "$work/build" -j "$jobs"
  cmake --install "$work/build" >/dev/null
  touch "$prefix/.complete"
  echo "kokkos4.sh: Kokkos 4.6.01 built into $prefix in $(( $(date +%s) - start )) s"
else
  echo "kokkos4.sh: Kokkos 4.6.01 from the cache $prefix"
fi

start=$(date +%s)
cmake -S . -B build/kokkos4 -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_WERROR=ON -DKokkos_ROOT="$prefix" \
  -DTANDEM_ENABLE_KOKKOS=ON -DTANDEM_ENABLE_CUDA=OFF -DTANDEM_ENABLE_HIP=OFF -DTANDEM_ENABLE_SIM=ON \
  -DTANDEM_ENABLE_MPI=ON -DTANDEM_ENABLE_DLPACK=ON -DTANDEM_BUILD_BENCH=OFF -DTANDEM_BUILD_EXAMPLES=OFF >/dev/null
# Only what the kokkos label and tandem check run (the CLI, the matrix and ML test programs, the
# Kokkos-owning program, the module): the rest is the main build's and gains nothing here. The
# backends and options are the main build's (CUDA and HIP aside, which set nothing in the shared
# sources): in ci/test.sh a compiler cache then gives this build every object that does not see
# Kokkos's headers, compiled there already.
cmake --build build/kokkos4 -j "$jobs" --target tandem_cli tandem_kokkos tandem_matrix_tests tandem_ml_tests \
  tandem_kokkos_user_program
echo "kokkos4.sh: tandem built against Kokkos 4.6.01 in $(( $(date +%s) - start )) s"
TANDEM_CACHE_DIR=build/kokkos4/tuning-cache build/kokkos4/tandem info | grep -i kokkos
# OMP_WAIT_POLICY=passive, as in the CMake test presets: with two tests at once on 2 cores, OpenMP
# threads spinning at barriers took the cores from each other (this ctest: 45-68 s, 8 s passive).
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=passive TANDEM_CACHE_DIR=build/kokkos4/tuning-cache \
  ctest --test-dir build/kokkos4 -L kokkos -j "$jobs" --output-on-failure
TANDEM_CACHE_DIR=build/kokkos4/tuning-cache build/kokkos4/tandem check --backend kokkos
echo "kokkos4.sh: passed against Kokkos 4.6.01"
