#!/usr/bin/env bash
# The openmp backend compiles some sources for AVX2 or AVX-512 (kernels_<isa>.cpp under a target
# pragma, vector_<isa>.cpp with -m flags), and matmul_amx.cpp for AMX tiles. One copy of each inline function or
# template instance is kept by the linker for the whole program: if an ISA object defined one
# with AVX instructions (a header included after the pragma, an inline helper outside the ISA's
# namespace), code that runs on every CPU could get it, and die with SIGILL on a CPU without that
# ISA, which no test on a newer CPU would notice. This checks the objects themselves: their weak
# symbols hold no VEX or EVEX instruction, and their strong symbols are named for their ISA.
#
# usage: tests/isa_objects.sh BUILD_DIR
set -euo pipefail
dir="${1:?usage: isa_objects.sh BUILD_DIR}/CMakeFiles/tandem.dir/backends/openmp"
for tool in nm objdump c++filt; do
  command -v "$tool" >/dev/null || { echo "SKIPPED: $tool is not installed (binutils)"; exit 0; }
done
shopt -s nullglob
objects=("$dir"/*_avx2.cpp.o "$dir"/*_avx512.cpp.o "$dir"/*_amx.cpp.o)
if [ "${#objects[@]}" -eq 0 ]; then
  echo "SKIPPED: no AVX2 or AVX-512 objects under $dir (not x86-64, or another build layout)"
  exit 0
fi
failed=0
for obj in "${objects[@]}"; do
  isa=avx2
  [[ "$obj" == *_avx512.cpp.o ]] && isa=avx512
  [[ "$obj" == *_amx.cpp.o ]] && isa=amx
  # Functions whose code has an instruction on vector registers in VEX/EVEX form (v...), on
  # AVX-512 mask registers (k...), or on AMX tiles.
  vex=$(objdump -d --no-show-raw-insn "$obj" |
    awk '/^[0-9a-f]+ <.*>:$/ { name = substr($2, 2, length($2) - 3); next }
         /^ +[0-9a-f]+:\t(v[a-z0-9]+|k[a-z0-9]+) / && /%[xyz]mm|%k[0-7]/ { hit[name] = 1 }
         /^ +[0-9a-f]+:\t(tile[a-z0-9]*|tdp[a-z0-9]+|ldtilecfg|sttilecfg)( |$)/ { hit[name] = 1 }
         END { for (n in hit) print n }' | sort -u)
  while read -r type sym; do
    case "$type" in
      W | V | u | i)
        if grep -qxF "$sym" <<<"$vex"; then
          echo "FAIL: $(basename "$obj"): the shared (weak) symbol $(c++filt "$sym") has $isa instructions"
          failed=1
        fi
        ;;
      T)
        if [[ "$(c++filt "$sym")" != *"$isa"* ]]; then
          echo "FAIL: $(basename "$obj"): the global symbol $(c++filt "$sym") is not named for $isa"
          failed=1
        fi
        ;;
    esac
  done < <(nm --defined-only "$obj" | awk '{ print $2, $3 }')
  echo "$(basename "$obj"): checked"
done
exit "$failed"
