#!/usr/bin/env bash
# ci/gpu.sh DIR: the GPU run, on a machine with an NVIDIA GPU that has only the CUDA toolkit, CMake,
# ninja and a C++ compiler (no Debian packages, no network: header-only needs such as doctest
# come from a folder given to CMake). It builds tandem with CUDA (the simulator, HIP and OpenBLAS
# off), runs the whole test matrix on `cuda`, runs compute-sanitizer memcheck over the cuda tests
# and racecheck over the shared-memory kernels, then the benchmarks (tandem_bench_gpu: the GPU
# targets against CUB, cuBLAS and the device copy; the sweeps; the ML benchmark), and writes
# every log, JSON and plot into DIR, summary.txt last.
#
# doctest, CLI11 and nlohmann/json come from Debian's packages where present, else from the copy
# of their headers and CMake packages that ci/gpu-deps.sh writes into .deps/ (carry it along).
# Environment: CMAKE_CUDA_ARCHITECTURES (default 90), TANDEM_GPU_BUILD (default build/gpu).
set -uo pipefail
out=${1:?usage: ci/gpu.sh DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TANDEM_GPU_BUILD:-$root/build/gpu}
mkdir -p "$out"
out=$(cd "$out" && pwd)
summary="$out/summary.txt"
: >"$summary"
failed=0
start=$(date +%s)

note() { echo "$*" | tee -a "$summary"; }
# step NAME COMMAND...: runs it with its output in DIR/NAME.log, and records the result.
step() {
  local name=$1
  shift
  local t0=$(date +%s)
  if "$@" >"$out/$name.log" 2>&1; then
    note "ok      $name ($(($(date +%s) - t0)) s)"
  else
    note "FAILED  $name ($(($(date +%s) - t0)) s): see $out/$name.log"
    failed=1
    return 1
  fi
}

note "tandem GPU run, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/device: /' | tee -a "$summary"
else
  note "device: nvidia-smi not found"
fi

nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
export PATH="$(dirname "$nvcc_path"):$PATH"
sanitizer=$(command -v compute-sanitizer || echo "$(dirname "$nvcc_path")/compute-sanitizer")
doctest=()
[ -d "$root/.deps" ] && doctest=("-DCMAKE_PREFIX_PATH=$root/.deps")
jobs=$(nproc)

step configure cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_ENABLE_CUDA=ON \
  -DTANDEM_ENABLE_HIP=OFF -DTANDEM_ENABLE_SIM=OFF -DTANDEM_ENABLE_BLAS=OFF \
  "-DCMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES:-90}" "${doctest[@]}"
step build cmake --build "$build" -j "$jobs"
if [ "$failed" -ne 0 ]; then
  note "the build failed: nothing else runs"
  exit 1
fi
"$build/tandem" info --json >"$out/info.json" 2>"$out/info.log"
if ! "$build/tandem" info | grep -Eq "^cuda +available"; then
  "$build/tandem" info | tee -a "$summary"
  note "no usable CUDA device here: the tests would only report Skipped; stopping"
  exit 2
fi

# Plain copies of the shipped data, for a build without zlib (the GPU machine has no zlib1g-dev).
mkdir -p "$build/plain-data"
for f in "$root"/data/*.gz; do gunzip -c "$f" >"$build/plain-data/$(basename "${f%.gz}")"; done
export TANDEM_TEST_DATA_DIR="$build/plain-data"

# The whole matrix (every family, the ML tests) on cuda; Skipped counts as a failure here.
step tests-cuda ctest --test-dir "$build" -L cuda -j 4 --output-on-failure --output-junit "$out/tests-cuda.xml" \
  --no-tests=error
if grep -q "Skipped" "$out/tests-cuda.log"; then
  note "FAILED  tests-cuda: some cuda tests were skipped on a machine with a GPU"
  failed=1
fi
step tests-cpu ctest --test-dir "$build" -L "unit|openmp|reference|cli" -j 4 --output-on-failure

if [ -x "$sanitizer" ]; then
  step memcheck "$sanitizer" --tool memcheck --error-exitcode 99 --leak-check full \
    "$build/tests/tandem_matrix_tests" --tandem-backend=cuda
  step memcheck-ml "$sanitizer" --tool memcheck --error-exitcode 99 \
    "$build/tests/tandem_ml_tests" --tandem-backend=cuda --test-case-exclude="*digits*"
  step racecheck "$sanitizer" --tool racecheck --error-exitcode 99 \
    "$build/tests/tandem_matrix_tests" --tandem-backend=cuda --test-case=reduce,scan,matmul,matrix
else
  note "FAILED  compute-sanitizer not found next to nvcc"
  failed=1
fi

# The issue's GPU targets, each against its peer in the same run (CUB, cuBLAS, the device copy).
step bench-gpu "$build/bench/tandem_bench_gpu" --backend cuda --json "$out/bench-gpu.json"
step bench "$build/tandem" bench --backend cuda --backend openmp --json "$out/bench.json"
step compare "$build/tandem" compare --full --backend openmp --backend cuda --json "$out/compare.json" \
  --crossover "$out/crossover.txt"
step bandwidth "$build/tandem" bench bandwidth --backend cuda --full --json "$out/bandwidth.json"
step memory "$build/tandem" bench memory --backend cuda --full --json "$out/memory.json"
step bench-ml "$build/bench/tandem_bench_ml" --backend cuda --backend openmp --json "$out/ml.json"
peers=()
if python3 -c "import torch, numpy" 2>/dev/null; then
  step pytorch-mlp python3 "$root/bench/pytorch_mlp.py" --json "$out/pytorch_mlp.json"
  step pytorch-ops python3 "$root/bench/pytorch_ops.py" --device cuda --full --json "$out/pytorch_ops.json" &&
    peers=("$out/pytorch_ops.json")
else
  note "skipped pytorch-mlp and pytorch-ops: no PyTorch (and NumPy) here"
fi
if python3 -c "import matplotlib" 2>/dev/null; then
  step plots python3 "$root/bench/plot.py" "$out/compare.json" "$out/plots" "${peers[@]}"
  step plot-bandwidth python3 "$root/bench/plot.py" "$out/bandwidth.json" "$out/plots"
  step plot-memory python3 "$root/bench/plot.py" "$out/memory.json" "$out/plots"
  step plot-targets python3 "$root/bench/plot.py" "$out/bench-gpu.json" "$out/plots"
else
  note "skipped plots: no matplotlib here (run bench/plot.py on the JSON elsewhere)"
fi

note "done in $(($(date +%s) - start)) s: $([ "$failed" -eq 0 ] && echo "all passed" || echo "FAILURES above")"
exit "$failed"
