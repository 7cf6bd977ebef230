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
cmake --preset ci >/dev/null
cmake --build --preset ci -j "$jobs"
ctest --preset ci -j "$jobs"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer =="
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$jobs"

echo "test.sh: all passed in $(( $(date +%s) - start )) s"
