#!/usr/bin/env bash
# ci/gpu.sh DIR [STAGE...]: the GPU run, on a machine with an NVIDIA GPU that has only the CUDA
# toolkit, CMake, ninja or make and a C++ compiler (no Debian packages, no network: header-only needs such
# as doctest come from a folder given to CMake). Every log, JSON and plot goes into DIR,
# DIR/summary.txt line by line as each step ends.
#
# Stages, in this order when none is named (name some to run a GPU session's few calls one by one):
#   build       configure and build with CUDA (simulator, HIP, OpenBLAS, MPI, zlib, Kokkos off)
#   hopper      only when named (a first call, before the stages below): the Hopper kernels
#               alone, tests/test_hopper_cuda.cu's cases (TMA boxes and wgmma products against the
#               simulator's model, the wgmma tier against cuBLAS) and tandem_bench_gpu --only
#               matmul (every matmul row, the wgmma kernel's among them)
#   tests       tandem info, tandem check --backend cuda (and DIR/gpu-kernel-sources-<device>.json:
#               the kernel sources' hashes and what the check said, for bench/results/), the whole
#               CTest matrix with label cuda (a Skipped test there is a failure: this machine has
#               the GPU they wait for); a case running past 60 s is named as hung
#   sanitizers  compute-sanitizer memcheck (matrix, ML, the Hopper cases), racecheck and synccheck (shared memory)
#   bench       tandem_bench_gpu (the GPU targets against CUB, cuBLAS and the device copy), tandem
#               bench, tandem compare --crossover, bench bandwidth, bench memory
#   ml          tandem_bench_ml on cuda and openmp (with and without graphs) beside PyTorch's MLP
#               (eager and CUDA graphs, with the ratios) and ops (bench/pytorch_mlp.py,
#               bench/pytorch_ops.py) where PyTorch is installed
#   plots       bench/plot.py over the JSON above (needs matplotlib)
# A stage after build needs the build: in the same call, or an earlier call's build/gpu kept on the
# machine. Each step runs under a deadline (TANDEM_GPU_DEADLINE seconds from the start, default
# 540), so that a call of the device tool (10 minutes at most) ends with its summary written:
# steps the deadline stops or never reaches say so.
#
# TANDEM_GPU_ARCHIVE=FILE: DIR packed into FILE (a .tar.gz) after every step, for a runner that
# brings back only a few files; the summary is in it. Where the runner empties its output folder
# before each command, keep DIR outside it, so that later calls add to the same DIR.
#
# doctest, CLI11 and nlohmann/json come from Debian's packages where present, else from the copy
# of their headers and CMake packages that ci/gpu-deps.sh writes into .deps/ (carry it along).
# To spend a GPU machine's time on the GPU only, build on a machine without one first:
# `bash ci/gpu-deps.sh; bash ci/gpu.sh /tmp/prep build` builds build/gpu (about 4 minutes on two
# cores) and records the hash of its sources and CUDA architectures in it; copy
# build/gpu (about 40 MB) and .deps/ along with the checkout, and the build stage there uses it
# as it is, if the sources are the same and the CUDA libraries it links are found there.
# Environment: CMAKE_CUDA_ARCHITECTURES (default 90a: the lent H100 and H200, and the only code that
# has the tensor_core tier's wgmma kernel), TANDEM_GPU_BUILD (default build/gpu).
set -uo pipefail
out=${1:?usage: ci/gpu.sh DIR [build|hopper|tests|sanitizers|bench|ml|plots]...}
shift
all_stages=(build hopper tests sanitizers bench ml plots)
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(build tests sanitizers bench ml plots)
for s in "${stages[@]}"; do
  case " ${all_stages[*]} " in
  *" $s "*) ;;
  *)
    echo "ci/gpu.sh: unknown stage '$s'; give any of: ${all_stages[*]}" >&2
    exit 2
    ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TANDEM_GPU_BUILD:-$root/build/gpu}
case $build in /*) ;; *) build=$PWD/$build ;; esac
deadline=${TANDEM_GPU_DEADLINE:-540}
archive=${TANDEM_GPU_ARCHIVE:-}
# This script's own settings, not tandem's: the tandem program warns of TANDEM_ names it does not read.
unset TANDEM_GPU_BUILD TANDEM_GPU_DEADLINE TANDEM_GPU_ARCHIVE
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -n "$archive" ]; then
  archive_dir=$(mkdir -p "$(dirname "$archive")" && cd "$(dirname "$archive")" && pwd) || exit 2
  case "$archive_dir/" in
  "$out"/*)
    echo "ci/gpu.sh: TANDEM_GPU_ARCHIVE ($archive) must lie outside DIR, which it packs" >&2
    exit 2
    ;;
  esac
  archive=$archive_dir/$(basename "$archive")
fi
summary="$out/summary.txt"
touch "$summary"
failed=0
start=$(date +%s)

note() { echo "$*" | tee -a "$summary"; }
pack() { [ -z "$archive" ] || tar -czf "$archive" -C "$(dirname "$out")" "$(basename "$out")"; }
# step NAME COMMAND...: runs it with its output in DIR/NAME.log, under what is left of the deadline,
# and records the result.
step() {
  local name=$1
  shift
  local t0 left rc
  t0=$(date +%s)
  left=$((deadline - (t0 - start)))
  if [ "$left" -lt 15 ]; then
    note "NOT RUN $name: ${left} s left of the ${deadline} s deadline; call again with this stage"
    failed=1
    return 1
  fi
  timeout --kill-after=10 "$left" "$@" >"$out/$name.log" 2>&1
  rc=$?
  local took=$(($(date +%s) - t0))
  if [ "$rc" -eq 0 ]; then
    note "ok      $name ($took s)"
  elif { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && [ "$took" -ge $((left - 1)) ]; then
    note "TIMEOUT $name after $took s (the deadline): see $out/$name.log"
    failed=1
  else
    note "FAILED  $name ($took s, exit $rc): see $out/$name.log"
    failed=1
  fi
  pack
  return "$rc"
}
wants() { case " ${stages[*]} " in *" $1 "*) return 0 ;; esac; return 1; }
finish() {
  note "stages ${stages[*]} done in $(($(date +%s) - start)) s: $([ "$failed" -eq 0 ] && echo "all passed" || echo "FAILURES above")"
  pack
  exit "$failed"
}

note "tandem GPU run, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown), stages: ${stages[*]}"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/device: /' | tee -a "$summary"
else
  note "device: nvidia-smi not found"
fi

nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
export PATH="$(dirname "$nvcc_path"):$PATH"
note "nvcc: $("$nvcc_path" --version 2>/dev/null | tail -1 || echo 'not found')"
sanitizer=$(command -v compute-sanitizer || echo "$(dirname "$nvcc_path")/compute-sanitizer")

# Deletes the build folder, and nothing that is not one: a CMake build inside this checkout.
remove_build() {
  local real top
  real=$(cd "$build" 2>/dev/null && pwd -P) || return 0
  top=$(cd "$root" && pwd -P)
  if [ -f "$build/CMakeCache.txt" ] && [ ! -e "$build/.git" ] && [ "${real#"$top"/}" != "$real" ]; then
    rm -rf "$build"
  else
    note "FAILED  $build is not a build folder inside $top: not deleted; give another TANDEM_GPU_BUILD"
    failed=1
    finish
  fi
}

# A build made on another machine and copied along (its 75 s CUDA compile is the build's longest
# step) names its own checkout's path in its CMake and CTest files: that path is made a link to
# this checkout where it is free; a build for another checkout is made afresh by the build stage.
configured=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)
if [ -n "$configured" ] && [ "$configured" != "$root" ]; then
  rel=${build#"$root"/}
  if [ "$rel" = "$build" ]; then
    note "FAILED  $build (outside this checkout) was configured for $configured: give another TANDEM_GPU_BUILD"
    failed=1
    finish
  fi
  [ -e "$configured" ] || { mkdir -p "$(dirname "$configured")" && ln -sfn "$root" "$configured"; }
  if [ "$(cd "$configured" 2>/dev/null && pwd -P)" = "$(cd "$root" && pwd -P)" ]; then
    note "build: $build was configured in $configured, which leads here: used from there"
    root=$configured
    build=$configured/$rel
  elif wants build; then
    note "build: $build was configured for $configured, another checkout: building afresh"
    remove_build
  else
    note "FAILED  $build was configured for $configured, another checkout: run the build stage"
    failed=1
    finish
  fi
fi

# What the build is made of, as one hash (relative paths: the same in any checkout): the sources
# it reads and the CUDA architectures. A build stage whose build folder was made from the same (by
# this script, here or on the machine that copied it along) does not build again: a copy that did
# not keep the files' times would rebuild it all.
sources_hash() {
  {
    echo "CMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES:-90a}"
    (cd "$root" && find CMakeLists.txt cmake include core algorithms backends cli tests bench examples data \
      \( -name __pycache__ -o -path bench/results \) -prune -o -type f -print0 2>/dev/null | LC_ALL=C sort -z |
      xargs -0 sha256sum)
  } | sha256sum | cut -d' ' -f1
}
configure_and_build() {
  local prefix=()
  [ -d "$root/.deps" ] && prefix=("-DCMAKE_PREFIX_PATH=$root/.deps")
  # Ninja where the machine has it (the GPU machine's image may not): else make.
  local generator=Ninja
  command -v ninja >/dev/null || generator="Unix Makefiles"
  # A build made with the other generator (one prepared with Ninja, copied to a machine without
  # it) cannot be configured again with this one: it is made afresh.
  local made_with
  made_with=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)
  if [ -n "$made_with" ] && [ "$made_with" != "$generator" ]; then
    note "build: $build was made with $made_with, which is not here: building afresh with $generator"
    remove_build
  fi
  step configure cmake -S "$root" -B "$build" -G "$generator" -DCMAKE_BUILD_TYPE=Release -DTANDEM_ENABLE_CUDA=ON \
    -DTANDEM_ENABLE_HIP=OFF -DTANDEM_ENABLE_SIM=OFF -DTANDEM_ENABLE_BLAS=OFF -DTANDEM_ENABLE_MPI=OFF \
    -DTANDEM_ENABLE_ZLIB=OFF -DTANDEM_ENABLE_KOKKOS=OFF -DTANDEM_BUILD_PYTHON=OFF \
    "-DCMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES:-90a}" "${prefix[@]}" &&
    step build cmake --build "$build" -j "$(nproc)" &&
    sources_hash >"$build/sources.sha256"
}
# The commit above is what git says where this runs; a runner that copies the working tree may
# carry older git metadata, so the sources' own hash says which tree ran (compare it with
# sources_hash run on a checkout).
note "sources: $(sources_hash)"
if wants build; then
  if [ -f "$build/sources.sha256" ] && [ "$(cat "$build/sources.sha256")" = "$(sources_hash)" ]; then
    note "build: $build was built from these very sources (sources.sha256): not built again"
  else
    [ -f "$build/sources.sha256" ] && note "build: $build was built from other sources (sources.sha256): building again"
    rm -f "$build/sources.sha256"
    configure_and_build
  fi
  # A copied build linked against the CUDA libraries where that machine keeps them (cuBLAS, NCCL).
  missing=$(ldd "$build/libtandem-cuda.so" 2>/dev/null | grep "not found")
  if [ "$failed" -eq 0 ] && [ -n "$missing" ]; then
    note "build: libtandem-cuda.so finds no $(echo "$missing" | awk '{print $1}' | tr '\n' ' ')here: building afresh"
    remove_build
    configure_and_build
  fi
  if [ "$failed" -ne 0 ]; then
    note "the build failed: nothing else runs"
    finish
  fi
fi

# The stages that run on the GPU need the build and a usable CUDA device (plots need neither).
data=()
if wants hopper || wants tests || wants sanitizers || wants bench || wants ml; then
  if [ ! -x "$build/tandem" ]; then
    note "FAILED  no build in $build: run the build stage first (in this call or an earlier one on this machine)"
    failed=1
    finish
  fi
  "$build/tandem" info --json >"$out/info.json" 2>"$out/info.log"
  "$build/tandem" info >"$out/info.txt" 2>&1
  if ! grep -Eq "^cuda +available" "$out/info.txt"; then
    tee -a "$summary" <"$out/info.txt"
    note "no usable CUDA device here: the tests would only report Skipped; stopping"
    failed=2
    finish
  fi
  # Plain copies of the shipped data for the tests (the build reads no gzip: the GPU machine has no
  # zlib1g-dev), given to the test programs alone (the tandem program would warn of the name).
  mkdir -p "$build/plain-data"
  for f in "$root"/data/*.gz; do gunzip -c "$f" >"$build/plain-data/$(basename "${f%.gz}")"; done
  data=(env "TANDEM_TEST_DATA_DIR=$build/plain-data")
fi

if wants hopper; then
  step hopper-tests "$build/tests/tandem_hopper_cuda_tests"
  if grep -q "SKIPPED" "$out/hopper-tests.log" 2>/dev/null; then
    note "FAILED  hopper-tests: skipped on a machine with a GPU: $(grep -m1 SKIPPED "$out/hopper-tests.log")"
    failed=1
  fi
  step bench-matmul "$build/bench/tandem_bench_gpu" --backend cuda --only matmul --json "$out/bench-gpu-matmul.json"
fi

if wants tests; then
  # A case that hangs (a kernel waiting for a block or a flag that never comes) is named and ends
  # the step within a minute (the per-case watchdog), instead of eating the deadline.
  step check "$build/tandem" check --backend cuda --case-timeout 60 --json "$out/check.json"
  check_rc=$?
  # Which kernel sources ran here, and what the check said of them: committed as
  # bench/results/gpu-kernel-sources-<device>.json, the build learns from it which kernels ran on
  # hardware (tandem info; the look-back scan becomes a default only after a passed check).
  if [ "$check_rc" -eq 0 ]; then
    verdict=passed
  elif hung=$(grep -o "HUNG: case '[^']*'" "$out/check.log" | head -1) && [ -n "$hung" ]; then
    verdict="hung at ${hung#HUNG: case }"
  elif [ "$check_rc" -eq 124 ] || [ "$check_rc" -eq 137 ]; then
    verdict="stopped by the deadline"
  else
    verdict="failed (exit $check_rc): $(grep -c FAIL "$out/check.log" 2>/dev/null || echo 0) failing rows"
  fi
  device_slug=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')
  bash "$root/ci/gpu-provenance.sh" "$out/gpu-kernel-sources-${device_slug:-unknown}.json" "$verdict" >>"$summary" 2>&1 ||
    note "FAILED  ci/gpu-provenance.sh: the kernel sources' record was not written"
  # The whole matrix (every family, the ML tests, NCCL's one-process test) on cuda.
  step tests-cuda "${data[@]}" env TANDEM_CASE_TIMEOUT=60 ctest --test-dir "$build" -L cuda -j 4 --output-on-failure \
    --output-junit "$out/tests-cuda.xml" --no-tests=error
  if grep -q "Skipped" "$out/tests-cuda.log" 2>/dev/null; then
    note "FAILED  tests-cuda: some cuda tests were skipped on a machine with a GPU"
    failed=1
  fi
fi

if wants sanitizers; then
  if [ -x "$sanitizer" ]; then
    step memcheck "${data[@]}" "$sanitizer" --tool memcheck --error-exitcode 99 --leak-check full \
      "$build/tests/tandem_matrix_tests" --tandem-backend=cuda
    step memcheck-ml "${data[@]}" "$sanitizer" --tool memcheck --error-exitcode 99 \
      "$build/tests/tandem_ml_tests" --tandem-backend=cuda --test-case-exclude="*digits*"
    # The kernels that share memory between a block's threads.
    step racecheck "$sanitizer" --tool racecheck --error-exitcode 99 \
      "$build/tests/tandem_matrix_tests" --tandem-backend=cuda --test-case=reduce,scan,matmul,matrix
    step synccheck "$sanitizer" --tool synccheck --error-exitcode 99 \
      "$build/tests/tandem_matrix_tests" --tandem-backend=cuda --test-case=reduce,scan,matmul,matrix
    # The Hopper kernels' TMA copies and wgmma operands (the small cases; not the 4096^3 product).
    step memcheck-hopper "$sanitizer" --tool memcheck --error-exitcode 99 \
      "$build/tests/tandem_hopper_cuda_tests" "--test-case=TMA boxes*,wgmma on the GPU*"
  else
    note "FAILED  compute-sanitizer not found next to nvcc"
    failed=1
  fi
fi

# The issue's GPU targets, each against its peer in the same run (CUB, cuBLAS, the device copy).
if wants bench; then
  step bench-gpu "$build/bench/tandem_bench_gpu" --backend cuda --json "$out/bench-gpu.json"
  step bench "$build/tandem" bench --backend cuda --backend openmp --json "$out/bench.json"
  step compare "$build/tandem" compare --full --backend openmp --backend cuda --json "$out/compare.json" \
    --crossover "$out/crossover.txt"
  step bandwidth "$build/tandem" bench bandwidth --backend cuda --full --json "$out/bandwidth.json"
  step memory "$build/tandem" bench memory --backend cuda --full --json "$out/memory.json"
fi

if wants ml; then
  step bench-ml "$build/bench/tandem_bench_ml" --backend cuda --backend openmp --json "$out/ml.json"
  if python3 -c "import torch, numpy" 2>/dev/null; then
    mine=()  # tandem's rows from the step above, printed beside PyTorch's with the ratios
    [ -f "$out/ml.json" ] && mine=(--tandem "$out/ml.json")
    step pytorch-mlp python3 "$root/bench/pytorch_mlp.py" "${mine[@]}" --json "$out/pytorch_mlp.json"
    step pytorch-ops python3 "$root/bench/pytorch_ops.py" --device cuda --full --json "$out/pytorch_ops.json"
  else
    note "skipped pytorch-mlp and pytorch-ops: no PyTorch (and NumPy) here"
  fi
fi

if wants plots; then
  if python3 -c "import matplotlib" 2>/dev/null; then
    peers=()
    [ -f "$out/pytorch_ops.json" ] && peers=("$out/pytorch_ops.json")
    for f in compare bandwidth memory bench-gpu; do
      if [ -f "$out/$f.json" ]; then
        if [ "$f" = compare ]; then
          step "plot-$f" python3 "$root/bench/plot.py" "$out/$f.json" "$out/plots" "${peers[@]}"
        else
          step "plot-$f" python3 "$root/bench/plot.py" "$out/$f.json" "$out/plots"
        fi
      else
        note "skipped plot-$f: no $f.json in $out (run the bench stage first, into the same DIR)"
      fi
    done
  else
    note "skipped plots: no matplotlib here (run bench/plot.py on the JSON elsewhere)"
  fi
fi

finish
