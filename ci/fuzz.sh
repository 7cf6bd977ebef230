#!/usr/bin/env bash
# Fuzzes the readers of untrusted input: the CSV reader, the IDX reader, the gzip path, the
# model files, the crossover file and the DLPack importer (fuzz/). Builds the fuzz preset (clang-15, libFuzzer, AddressSanitizer +
# UndefinedBehaviorSanitizer) and runs each target for SECONDS, two at a time, starting from the
# seed corpus in fuzz/corpus/<target> (copied into build/fuzz/corpus/<target>, which keeps what
# earlier runs learnt). Any crash, leak, sanitizer report, timeout or out-of-memory is a finding:
# the input is saved under build/fuzz/findings/<target>/ and the script fails, naming it.
#   ci/fuzz.sh                 60 s per target (CI's short stage)
#   ci/fuzz.sh 600             10 minutes per target (the long run the README describes)
#   ci/fuzz.sh 120 csv model   some targets only
# A finding becomes a regression test: fix it, add the input to fuzz/corpus/<target> (every run
# replays the corpus first) and a unit test that names the case.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(csv idx gzip model crossover dlpack)
case "$seconds" in '' | *[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, not '$seconds'" >&2; exit 2 ;; esac
for t in "${targets[@]}"; do
  [ -d "fuzz/corpus/$t" ] || { echo "fuzz.sh: no target '$t' (csv, idx, gzip, model, crossover, dlpack)" >&2; exit 2; }
done
command -v clang++-15 >/dev/null || { echo "fuzz.sh: clang++-15 is missing: run ci/install-deps.sh" >&2; exit 1; }

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)"

run() {
  local t=$1 corpus=build/fuzz/corpus/$1 findings=build/fuzz/findings/$1
  mkdir -p "$corpus" "$findings"
  cp -n fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  # -rss_limit_mb: the readers' own caps must hold well under it; -timeout: no input may take 10 s.
  build/fuzz/fuzz/fuzz_"$t" "$corpus" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings"/ >"build/fuzz/$t.log" 2>&1
}

mkdir -p build/fuzz
failed=()
pids=()
names=()
for t in "${targets[@]}"; do
  run "$t" &
  pids+=($!)
  names+=("$t")
  if [ ${#pids[@]} -eq 2 ]; then  # two at a time: one per core of a 2-core CI machine
    for i in "${!pids[@]}"; do wait "${pids[$i]}" || failed+=("${names[$i]}"); done
    pids=()
    names=()
  fi
done
for i in "${!pids[@]}"; do wait "${pids[$i]}" || failed+=("${names[$i]}"); done

for t in "${targets[@]}"; do
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "build/fuzz/$t.log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "build/fuzz/$t.log" | tail -1 || echo "cov: ?")
  echo "fuzz.sh: $t: $runs inputs in ${seconds} s, $cov, corpus $(ls "build/fuzz/corpus/$t" | wc -l) files"
done
if [ ${#failed[@]} -gt 0 ]; then
  for t in "${failed[@]}"; do
    echo "fuzz.sh: $t found a problem; the end of build/fuzz/$t.log:" >&2
    tail -40 "build/fuzz/$t.log" >&2
    echo "fuzz.sh: the input: $(ls build/fuzz/findings/"$t"/* 2>/dev/null | tr '\n' ' ')" >&2
    echo "fuzz.sh: replay it with build/fuzz/fuzz/fuzz_$t FILE" >&2
  done
  exit 1
fi
echo "fuzz.sh: no findings"
