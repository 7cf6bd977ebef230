# Which loops the openmp sums read inputs past the last-level cache with (TANDEM_OPENMP_REDUCE_ISA):
# with the avx512 kernels, avx2's 256-bit loops or their own, as forced, and what a cache entry
# says; another ISA's loops are refused, an entry naming them is measured again, and that
# calibration times the avx2 loops.
#   cmake -DTANDEM=path/to/tandem -DDIR=cache-dir -P sums_isa.cmake
set(ENV{TANDEM_CACHE_DIR} "${DIR}")
unset(ENV{TANDEM_TUNING})
# The stores alone (as stores_cache_per_isa.cmake).
set(ENV{TANDEM_OPENMP_GEMM_BLOCKING} "96,512,2048")

# info's output with TANDEM_CPU_ISA and TANDEM_OPENMP_REDUCE_ISA set ("" unsets); its exit code in rc_var.
function(run_info cpu_isa sums_isa out_var rc_var)
  if(cpu_isa STREQUAL "")
    unset(ENV{TANDEM_CPU_ISA})
  else()
    set(ENV{TANDEM_CPU_ISA} "${cpu_isa}")
  endif()
  if(sums_isa STREQUAL "")
    unset(ENV{TANDEM_OPENMP_REDUCE_ISA})
  else()
    set(ENV{TANDEM_OPENMP_REDUCE_ISA} "${sums_isa}")
  endif()
  execute_process(COMMAND "${TANDEM}" info RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(${out_var} "${out}${err}" PARENT_SCOPE)
  set(${rc_var} "${rc}" PARENT_SCOPE)
endfunction()

set(narrow "avx2's for sum, norm2, dot and mse past the last-level cache")
# The default kernels and the cache entry they read (the tuning steps before this one wrote it).
run_info("" "" out rc)
string(REGEX MATCH "kernels: ([a-z0-9]+) " _ "${out}")
set(isa "${CMAKE_MATCH_1}")
string(REGEX MATCH "stores chosen by: cached in ([^\n;]+openmp-stores-[0-9a-f]+\\.txt)" _ "${out}")
set(entry "${CMAKE_MATCH_1}")
if(NOT rc EQUAL 0 OR NOT isa OR NOT entry)
  message(FATAL_ERROR "tandem info: exit ${rc}, expected the kernels' ISA and a cached store entry in:\n${out}")
endif()

# Another ISA's loops are refused, whatever the CPU: avx512's under the avx2 (or generic) kernels.
set(capped avx2)
if(isa STREQUAL "generic")
  set(capped generic)
endif()
run_info("${capped}" avx512 out rc)
if(NOT rc EQUAL 2 OR NOT out MATCHES "TANDEM_OPENMP_REDUCE_ISA='avx512': this process's openmp kernels are ${capped}")
  message(FATAL_ERROR "TANDEM_CPU_ISA=${capped} TANDEM_OPENMP_REDUCE_ISA=avx512: expected exit 2 and a refusal, got ${rc}:\n${out}")
endif()
if(NOT isa STREQUAL "avx512")
  message(STATUS "SKIPPED: this CPU's kernels are ${isa}: no AVX-512 kernels to read the sums with avx2's loops")
  return()
endif()

# Forced either way; the kernels' line says which.
run_info("" avx2 out rc)
if(NOT rc EQUAL 0 OR NOT out MATCHES "TANDEM_OPENMP_REDUCE_ISA" OR NOT out MATCHES "${narrow}")
  message(FATAL_ERROR "TANDEM_OPENMP_REDUCE_ISA=avx2: exit ${rc}, expected '${narrow}':\n${out}")
endif()
run_info("" avx512 out rc)
if(NOT rc EQUAL 0 OR out MATCHES "${narrow}" OR NOT out MATCHES "kernels: avx512 \\(elementwise, reductions, scans, softmax\\)\n")
  message(FATAL_ERROR "TANDEM_OPENMP_REDUCE_ISA=avx512: exit ${rc}, expected the avx512 loops only:\n${out}")
endif()

# The entry's choice is read back: avx2, then avx512; one naming the generic loops is measured
# again, and that calibration times the avx2 loops first.
foreach(step "avx2|1" "avx512|0" "generic|measured")
  string(REPLACE "|" ";" fields "${step}")
  list(GET fields 0 value)
  list(GET fields 1 expect)
  file(READ "${entry}" text)
  string(REGEX REPLACE "\nreduce_isa [^\n]*\n" "\nreduce_isa ${value}\n" text "${text}")
  file(WRITE "${entry}" "${text}")
  run_info("" "" out rc)
  if(expect STREQUAL "measured")
    if(NOT rc EQUAL 0 OR NOT out MATCHES "stores chosen by: calibrated now"
       OR NOT out MATCHES "reduction prefetch measured: avx2 off [0-9.]+, off [0-9.]+, l2:2048")
      message(FATAL_ERROR "an entry naming the generic loops under the avx512 kernels: expected a calibration "
                          "that times the avx2 loops:\n${out}")
    endif()
  elseif(NOT rc EQUAL 0 OR NOT out MATCHES "stores chosen by: cached in" OR (expect AND NOT out MATCHES "${narrow}")
         OR (NOT expect AND out MATCHES "${narrow}"))
    message(FATAL_ERROR "an entry with reduce_isa ${value}: exit ${rc}, expected it read back:\n${out}")
  endif()
endforeach()
message(STATUS "ok: the sums' loops forced, refused, read back from the cache and calibrated")
