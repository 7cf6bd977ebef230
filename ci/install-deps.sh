#!/usr/bin/env bash
# Installs what tandem needs on Debian 12, as root (or through sudo). Quick when all is present.
# CUDA is not a Debian package: when /usr/local/cuda exists the build uses it, else leaves CUDA out.
# libboost-context-dev gives the GPU simulator its fibers; hipcc, libamdhip64-dev and librocprim-dev (ROCm from
# Debian) compile the HIP backend for AMD GPUs, which needs no GPU to build. libcli11-dev and
# nlohmann-json3-dev parse the command line and write JSON for the tandem CLI. zlib1g-dev reads
# gzip-compressed data; python3-matplotlib draws the plots of tandem compare/bench --plot;
# libtrilinos-kokkos-dev is Debian's Kokkos (3.4, Serial) for the kokkos backend; Open MPI runs
# tandem::dist and its multi-process tests. clang-15 (with its sanitizer and libFuzzer runtimes)
# builds the fuzz targets (ci/fuzz.sh). libdlpack-dev is the DLPack header (zero-copy exchange with
# NumPy and PyTorch); python3-dev and python3-venv build the Python package in a virtual environment.
# ccache lets ci/test.sh's pip and Kokkos 4 builds take the objects its release build compiled.
# libopenblas-openmp-dev is OpenBLAS built on OpenMP, one thread pool with the openmp backend's (the
# pthreads build that libopenblas-dev brings spins its own workers beside it: docs/backends.md).
set -euo pipefail
packages=(cmake ninja-build g++ make pkgconf doctest-dev libcli11-dev nlohmann-json3-dev libopenblas-openmp-dev libboost-context-dev zlib1g-dev python3-matplotlib hipcc libamdhip64-dev librocprim-dev libtrilinos-kokkos-dev libopenmpi-dev openmpi-bin clang-15 libdlpack-dev python3-dev python3-venv ccache)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all present (${packages[*]})"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
