#!/usr/bin/env bash
# README command 1: install dependencies, build tandem (Release), and run the main job on this
# machine: what backends it has, the cross-backend verification pass, the CPU benchmark and the
# GPU simulator's speed, and an MLP trained on the shipped digits.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install-deps.sh
cmake --preset cpu >/dev/null
cmake --build --preset cpu
./build/cpu/tandem info
./build/cpu/tandem check --failures-only
./build/cpu/bench/tandem_bench_cpu --json build/cpu/bench-cpu.json
./build/cpu/bench/tandem_bench_sim --quick
./build/cpu/tandem train --data data/digits.csv.gz
./build/cpu/tandem regress --data data/diabetes_data_raw.csv.gz --target data/diabetes_target.csv.gz
