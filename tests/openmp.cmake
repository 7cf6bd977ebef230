# Included by tests/CMakeLists.txt: the openmp backend's tests beyond the cross-backend matrix.
# Every kernel variant this CPU can run (ISA caps), the large-output store variants and the
# prefetches forced through the environment, and its CPU tuning: calibrated, cached, read back,
# forced and refused.

# Every variant of the openmp kernels this CPU can run, not only the best one: the whole matrix
# (elementwise, matrix, matmul's micro-kernel, reductions, scans, softmax) with TANDEM_CPU_ISA
# capping the choice (an AVX-512 CPU runs avx512 in the plain matrix; a CPU without AVX2 reports
# the avx2 run SKIPPED, and so does one whose widest kernels are avx2: the plain matrix ran them).
foreach(isa generic avx2)
  add_test(NAME "openmp: the matrix with the ${isa} kernels" COMMAND tandem_matrix_tests --tandem-backend=openmp)
  set_tests_properties("openmp: the matrix with the ${isa} kernels" PROPERTIES LABELS openmp SKIP_REGULAR_EXPRESSION "SKIPPED:"
                       ENVIRONMENT "TANDEM_CPU_ISA=${isa};TANDEM_TEST_SKIP_IF_WIDEST=${isa}")
  add_test(NAME "openmp: TANDEM_CPU_ISA=${isa} selects the ${isa} kernels"
           COMMAND tandem_unit_tests "--test-case=openmp's kernels are the widest*")
  # TANDEM_TUNING=table: the kernels chosen do not depend on the tuning, and the capped matrix
  # above calibrates (under ASan this one's calibration took 25 s).
  set_tests_properties("openmp: TANDEM_CPU_ISA=${isa} selects the ${isa} kernels" PROPERTIES LABELS openmp
                       ENVIRONMENT "TANDEM_CPU_ISA=${isa};TANDEM_TUNING=table" SKIP_REGULAR_EXPRESSION "SKIPPED:")
endforeach()

# The tensor tier follows TANDEM_CPU_ISA too: capped at avx512 it runs on AVX512-BF16 where the
# CPU has that (and is not offered otherwise), capped at avx2 it is not offered (the plain unit
# tests run it on AMX where the CPU has AMX-BF16). Each engine the CPU has is verified on large
# products here, and by the matrix's matmul cases below.
foreach(isa avx512 avx2)
  # Capped at avx2 no engine is left: only the test that it is not offered.
  set(cases "openmp's tensor_core tier is bf16*")
  if(isa STREQUAL "avx512")
    set(cases "openmp's tensor_core tier*")
  endif()
  add_test(NAME "openmp: the tensor_core tier under TANDEM_CPU_ISA=${isa}" COMMAND tandem_unit_tests "--test-case=${cases}")
  set_tests_properties("openmp: the tensor_core tier under TANDEM_CPU_ISA=${isa}" PROPERTIES LABELS openmp
                       ENVIRONMENT "TANDEM_CPU_ISA=${isa};TANDEM_TUNING=table" SKIP_REGULAR_EXPRESSION "SKIPPED:")
endforeach()
# The tensor tier's split of a product among the team, on more threads than a CI machine may have
# cores (an odd team, and one of six that takes a 2 x 3 grid), on the CPU's best engine (AMX where
# it has AMX-BF16) and capped at avx512 (AVX512-BF16); the plain and capped runs above take the team
# and one thread. Where the CPU has neither engine they report SKIPPED.
foreach(threads 3 6)
  foreach(cap best avx512)
    set(name "openmp: the tensor_core tier split among ${threads} threads, ${cap} engine")
    set(env "OMP_NUM_THREADS=${threads};TANDEM_TUNING=table")
    if(cap STREQUAL "avx512")
      list(APPEND env "TANDEM_CPU_ISA=avx512")
    endif()
    add_test(NAME "${name}" COMMAND tandem_unit_tests "--test-case=openmp's tensor_core tier gives every block*")
    set_tests_properties("${name}" PROPERTIES LABELS openmp ENVIRONMENT "${env}" SKIP_REGULAR_EXPRESSION "SKIPPED:")
  endforeach()
endforeach()
# The team's workers kept off the calling thread's CPU, on a fixed team (the plain unit run reports
# SKIPPED): 2 threads (on a 2-CPU machine, each worker on the other CPU), 3 (more threads than such
# a machine's CPUs: every CPU), and with the placement off (where the OS puts them).
foreach(case "2;on" "3;on" "2;off")
  list(GET case 0 threads)
  list(GET case 1 placement)
  set(name "openmp: the team's workers off the caller's CPU, ${threads} threads, placement ${placement}")
  add_test(NAME "${name}" COMMAND tandem_unit_tests "--test-case=openmp keeps its team's workers*")
  set_tests_properties("${name}" PROPERTIES LABELS openmp SKIP_REGULAR_EXPRESSION "SKIPPED:"
                       ENVIRONMENT "OMP_NUM_THREADS=${threads};TANDEM_OPENMP_PLACEMENT=${placement};TANDEM_TUNING=table")
endforeach()
# The automatic bf16 tier from the table (the plain unit tests run it with the measured crossover).
add_test(NAME "openmp: the automatic bf16 tier from the table under TANDEM_CPU_ISA=avx512"
         COMMAND tandem_unit_tests "--test-case=openmp's automatic tier takes*")
set_tests_properties("openmp: the automatic bf16 tier from the table under TANDEM_CPU_ISA=avx512" PROPERTIES
                     LABELS openmp ENVIRONMENT "TANDEM_CPU_ISA=avx512;TANDEM_TUNING=table"
                     SKIP_REGULAR_EXPRESSION "SKIPPED:")
add_test(NAME "openmp: the matmul cases with the tensor_core tier on AVX512-BF16"
         COMMAND tandem_matrix_tests --tandem-backend=openmp --test-case=matmul)
set_tests_properties("openmp: the matmul cases with the tensor_core tier on AVX512-BF16" PROPERTIES LABELS openmp
                     ENVIRONMENT "TANDEM_CPU_ISA=avx512;TANDEM_TUNING=table" SKIP_REGULAR_EXPRESSION "SKIPPED:")

# The vendor tier's line names the kernels OpenBLAS chose, from OpenBLAS itself: forced to its
# oldest x86-64 core, it says so (the unit test checks the warning that goes with it).
if(TANDEM_ENABLE_BLAS_ON AND TARGET tandem_cli AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
  add_test(NAME "openmp: tandem info names the OpenBLAS kernels in use" COMMAND tandem_cli info)
  set_tests_properties("openmp: tandem info names the OpenBLAS kernels in use" PROPERTIES LABELS openmp
                       ENVIRONMENT "OPENBLAS_CORETYPE=Prescott;TANDEM_TUNING=table"
                       PASS_REGULAR_EXPRESSION "vendor tier: OpenBLAS [0-9.]+, Prescott kernels \\(SSE\\)")
endif()

# No code of those ISA variants can leak into code that runs on every CPU (see the script).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
  add_test(NAME "openmp: the ISA objects share no AVX code" COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/isa_objects.sh
                                                                       ${PROJECT_BINARY_DIR})
  set_tests_properties("openmp: the ISA objects share no AVX code" PROPERTIES LABELS openmp
                       SKIP_REGULAR_EXPRESSION "SKIPPED:" FAIL_REGULAR_EXPRESSION "FAIL:")
endif()

# The register_blocked tier with a cache blocking that is no multiple of any tile (every block
# edge is a partial tile, k and n take several blocks) on an odd thread count (uneven row splits),
# with each packed panel kept in L1 in turn (the two loop orders a calibration may choose).
# And the product of the unit test that takes the calibrated f32 blocking (whichever this CPU's
# calibration picks), forced here to the deepest candidate (k blocks of 1024), which a CPU with a
# large L2 may not pick.
foreach(panel a b)
  string(TOUPPER ${panel} panel_name)
  add_test(NAME "openmp: matmul with an odd cache blocking on 3 threads, ${panel_name} panels in L1"
           COMMAND tandem_matrix_tests --tandem-backend=openmp --test-case=matmul)
  set_tests_properties("openmp: matmul with an odd cache blocking on 3 threads, ${panel_name} panels in L1" PROPERTIES
                       LABELS openmp SKIP_REGULAR_EXPRESSION "SKIPPED:"
                       ENVIRONMENT "TANDEM_OPENMP_GEMM_BLOCKING=7,13,40;TANDEM_OPENMP_GEMM_L1=${panel};OMP_NUM_THREADS=3")
  add_test(NAME "openmp: a large f32 matmul in k blocks of 1024, ${panel_name} panels in L1"
           COMMAND tandem_unit_tests "--test-case=f32 matmul large enough for the calibrated*")
  set_tests_properties("openmp: a large f32 matmul in k blocks of 1024, ${panel_name} panels in L1" PROPERTIES
                       LABELS openmp SKIP_REGULAR_EXPRESSION "SKIPPED:"
                       ENVIRONMENT "TANDEM_OPENMP_GEMM_BLOCKING=120,1024,3072;TANDEM_OPENMP_GEMM_L1=${panel}")
endforeach()

# The openmp scan's threads wait only for the sums they need, with no barrier (PhaseCounter in
# scan.inl): on 5 threads, more than a CI machine may have cores, they drift a phase apart and
# wait by yielding; a sum read before it is written, or overwritten before it is read, shows as a
# wrong prefix. Dozens of super-blocks (about 50 with a 32 MiB L3), streamed, into aligned and
# unaligned outputs.
add_test(NAME "openmp: scans past the last-level cache on 5 threads"
         COMMAND tandem_unit_tests "--test-case=scans larger than the last-level cache*")
set_tests_properties("openmp: scans past the last-level cache on 5 threads" PROPERTIES LABELS openmp
                     ENVIRONMENT "OMP_NUM_THREADS=5;TANDEM_TUNING=table" SKIP_REGULAR_EXPRESSION "SKIPPED:")

# Large copies through openmp's streaming-store copy, at every alignment.
add_test(NAME "openmp: large copies with streaming stores" COMMAND tandem_unit_tests "--test-case=large copies*")
set_tests_properties("openmp: large copies with streaming stores" PROPERTIES LABELS openmp
                     ENVIRONMENT "TANDEM_OPENMP_STREAM_FROM=0;TANDEM_OPENMP_STORES=streaming;TANDEM_OPENMP_STORE_RUNS=4")

# The loops on either side of the parallel threshold, whatever this CPU measured: every loop on the
# team, and every loop on the calling thread.
foreach(from 0 1000000000)
  set(name "openmp: elementwise, reductions and scans with loops on the team from ${from} elements")
  add_test(NAME "${name}" COMMAND tandem_matrix_tests --tandem-backend=openmp "--test-case=elementwise,matrix,reduce,scan")
  set_tests_properties("${name}" PROPERTIES LABELS openmp SKIP_REGULAR_EXPRESSION "SKIPPED:"
                       ENVIRONMENT "TANDEM_OPENMP_PARALLEL_FROM=${from}")
endforeach()

# The large-output paths of the openmp backend (outputs past the last-level cache) at the
# matrix's sizes, in every store variant its tuning may choose on some CPU: with
# TANDEM_OPENMP_STREAM_FROM=0 every large-enough output takes them.
add_test(NAME "openmp: the matrix with streaming stores for every output" COMMAND tandem_matrix_tests --tandem-backend=openmp)
set_tests_properties("openmp: the matrix with streaming stores for every output" PROPERTIES LABELS openmp
                     ENVIRONMENT "TANDEM_OPENMP_STREAM_FROM=0;TANDEM_OPENMP_STORES=streaming;TANDEM_OPENMP_STORE_RUNS=4"
                     SKIP_REGULAR_EXPRESSION "SKIPPED:")
foreach(stores streaming plain)
  foreach(runs 1 2 4)
    set(name "openmp: elementwise and slices with ${stores} stores in ${runs} run(s) per thread")
    add_test(NAME "${name}" COMMAND tandem_matrix_tests --tandem-backend=openmp
             "--test-case=elementwise,matrix,slices at every alignment,scan")
    set_tests_properties("${name}" PROPERTIES LABELS openmp SKIP_REGULAR_EXPRESSION "SKIPPED:"
                         ENVIRONMENT "TANDEM_OPENMP_STREAM_FROM=0;TANDEM_OPENMP_STORES=${stores};TANDEM_OPENMP_STORE_RUNS=${runs}")
  endforeach()
endforeach()

# The scan's and the sums' prefetch into each cache the calibration may choose, at its nearest and
# farthest, and none, in this CPU's widest pass. A prefetch changes no result: these run each
# instantiation (that a setting reaches the kernels is what `tandem info` shows, below). The sums
# (sum, dot, norm2 of 300007 elements in "slices at every alignment"; mse shares their loop)
# prefetch in their streams, which take 65536 elements or more per thread: 2 threads here; the
# table's 2 KiB into L2 runs in every test with TANDEM_TUNING=table.
foreach(kind "scans|SCAN|scan" "sums|REDUCE|reduce")
  string(REPLACE "|" ";" fields "${kind}")
  list(GET fields 0 what)
  list(GET fields 1 variable)
  list(GET fields 2 test_case)
  foreach(prefetch l1:64 l2:65536 off)
    add_test(NAME "openmp: ${what} prefetching ${prefetch}"
             COMMAND tandem_matrix_tests --tandem-backend=openmp "--test-case=${test_case},slices at every alignment")
    set_tests_properties("openmp: ${what} prefetching ${prefetch}" PROPERTIES LABELS openmp
      ENVIRONMENT "TANDEM_OPENMP_${variable}_PREFETCH=${prefetch};TANDEM_OPENMP_STREAM_FROM=0;TANDEM_TUNING=table;OMP_NUM_THREADS=2"
      SKIP_REGULAR_EXPRESSION "SKIPPED:")
  endforeach()
endforeach()

# The sums past the last-level cache with the AVX2 loops under the AVX-512 kernels, at every
# alignment (a CPU without AVX-512 reports SKIPPED: its sums are its kernels' own, run above).
add_test(NAME "openmp: sums with the avx2 loops under the avx512 kernels"
         COMMAND tandem_matrix_tests --tandem-backend=openmp "--test-case=reduce,slices at every alignment")
set_tests_properties("openmp: sums with the avx2 loops under the avx512 kernels" PROPERTIES LABELS openmp
  ENVIRONMENT "TANDEM_OPENMP_REDUCE_ISA=avx2;TANDEM_OPENMP_STREAM_FROM=0;TANDEM_TUNING=table;OMP_NUM_THREADS=2;TANDEM_TEST_NEEDS_ISA=avx512"
  SKIP_REGULAR_EXPRESSION "SKIPPED:")

# The scan's SSE2 pass (AVX-512 CPUs take the AVX-512 one), streamed and not.
foreach(stream_from off 0)
  add_test(NAME "openmp: scans with the SSE2 pass, streaming from ${stream_from}"
           COMMAND tandem_matrix_tests --tandem-backend=openmp "--test-case=scan,slices at every alignment")
  set_tests_properties("openmp: scans with the SSE2 pass, streaming from ${stream_from}" PROPERTIES LABELS openmp
                       ENVIRONMENT "TANDEM_CPU_ISA=generic;TANDEM_OPENMP_STREAM_FROM=${stream_from}"
                       SKIP_REGULAR_EXPRESSION "SKIPPED:")
endforeach()

# The openmp tuning first needed inside the caller's parallel region: the table's, nothing cached.
if(TANDEM_ENABLE_OPENMP_ON)
  add_executable(tandem_nested_tuning_program nested_tuning_program.cpp)
  target_link_libraries(tandem_nested_tuning_program PRIVATE tandem OpenMP::OpenMP_CXX tandem_warnings)
  add_test(NAME "openmp: tuning first needed inside a parallel region is the table's"
           COMMAND tandem_nested_tuning_program ${CMAKE_CURRENT_BINARY_DIR}/nested-tuning-cache)
  set_tests_properties("openmp: tuning first needed inside a parallel region is the table's" PROPERTIES LABELS openmp
    ENVIRONMENT "TANDEM_OPENMP_STREAM_FROM=0"
    PASS_REGULAR_EXPRESSION "stores chosen by: table \\([^)]*\\); not measured: first needed inside a parallel region.*gemm blocking f32: mc [0-9]+, kc [0-9]+, nc [0-9]+, [AB] panels in L1 \\(table: [a-z0-9]+; not measured: first needed inside a parallel region\\).*cache files: 0\nresults: right")

  # Which ops take the large-output path: by the bytes they move (distinct inputs and output), seen
  # through the store tuning it asks for (see the program). n = 65536 floats: 3 arrays 786432 bytes.
  add_executable(tandem_stream_threshold_program stream_threshold_program.cpp)
  target_link_libraries(tandem_stream_threshold_program PRIVATE tandem tandem_warnings)
  foreach(case_and_bytes "elementwise|786432" "sums|524288" "scan|524288" "copy|524288")
    string(REPLACE "|" ";" fields "${case_and_bytes}")
    list(GET fields 0 case)
    list(GET fields 1 bytes)
    add_test(NAME "openmp: ${case} take the large-output path by the bytes they move"
             COMMAND tandem_stream_threshold_program ${CMAKE_CURRENT_BINARY_DIR}/stream-threshold-${case} ${case})
    # The loops on the team from the table's 32768 elements, as the cases' 65536 need to reach the
    # large-output path (a sleeping team measures its threshold at 256K elements on 2 vCPUs).
    set_tests_properties("openmp: ${case} take the large-output path by the bytes they move" PROPERTIES
                         LABELS openmp ENVIRONMENT "TANDEM_OPENMP_STREAM_FROM=${bytes};TANDEM_OPENMP_PARALLEL_FROM=32768")
  endforeach()
endif()

# The openmp store tuning: measured and cached on first use, read back after, a table on request,
# and bad settings refused (a cache directory of the test's own, so runs do not share it).
if(TANDEM_ENABLE_OPENMP_ON)
  set(tuning_cache "${CMAKE_CURRENT_BINARY_DIR}/tuning-cache-test")
  set(tuning_steps
      "calibrated, then cached|TANDEM_TUNING=calibrate|0|stores chosen by: calibrated now \\([0-9.]+ s, 3 x [0-9]+ MiB in windows of [0-9]+ MiB\\). cached in ${tuning_cache}/openmp-stores-.*gemm blocking f32: mc [0-9]+, kc [0-9]+, nc [0-9]+, [AB] panels in L1 \\(calibrated now \\([0-9.]+ s\\). cached in ${tuning_cache}/openmp-gemm-"
      "read back from the cache|TANDEM_TUNING=auto|0|stores chosen by: cached in ${tuning_cache}/openmp-stores-.*scan prefetch: [0-9a-z ]+ .*scan prefetch measured: l1:2048 [0-9.]+, .*off [0-9.]+ GB/s.*reduction prefetch: [0-9a-zA-Z ()]+.*reduction prefetch measured: (avx2 off [0-9.]+, )?off [0-9.]+, l2:2048 [0-9.]+, .*GB/s.*gemm blocking f32: mc [0-9]+, kc [0-9]+, nc [0-9]+, [AB] panels in L1 \\(cached in ${tuning_cache}/openmp-gemm-.*gemm blocking measured: [0-9]+,[0-9]+,[0-9]+ [0-9.]+, [0-9]+,[0-9]+,[0-9]+,A [0-9.]+[, 0-9.A]* GFLOP/s"
      "from the table on request|TANDEM_TUNING=table|0|stores chosen by: table \\(.*gemm blocking f32: mc [0-9]+, kc [0-9]+, nc [0-9]+, [AB] panels in L1 \\(table: [a-z0-9]+\\)"
      "gemm blocking forced|TANDEM_OPENMP_GEMM_BLOCKING=96,512,2048|0|gemm blocking f32: mc 96, kc 512, nc 2048, B panels in L1 \\(TANDEM_OPENMP_GEMM_BLOCKING\\)"
      "gemm panel in L1 forced|TANDEM_OPENMP_GEMM_L1=a|0|gemm blocking f32: mc [0-9]+, kc [0-9]+, nc [0-9]+, A panels in L1 \\(cached in ${tuning_cache}/openmp-gemm-[^;]*. the panel in L1 from TANDEM_OPENMP_GEMM_L1\\)"
      "refused: gemm panel c in L1|TANDEM_OPENMP_GEMM_L1=c|2|TANDEM_OPENMP_GEMM_L1='c' is not one of a or b"
      "forced through the environment|TANDEM_OPENMP_STORES=plain|0|stores: plain, .*chosen by: cached in .*. stores from TANDEM_OPENMP_STORES"
      "refused: 3 runs|TANDEM_OPENMP_STORE_RUNS=3|2|TANDEM_OPENMP_STORE_RUNS='3'.*1, 2 or 4"
      "scan prefetch forced|TANDEM_OPENMP_SCAN_PREFETCH=l2:8192|0|scan prefetch: 8192 bytes ahead into L2"
      "scan prefetch off|TANDEM_OPENMP_SCAN_PREFETCH=off|0|scan prefetch: off \\(the hardware prefetchers alone\\)"
      "refused: scan prefetch into L3|TANDEM_OPENMP_SCAN_PREFETCH=l3:100|2|TANDEM_OPENMP_SCAN_PREFETCH='l3:100'.*l1:BYTES or l2:BYTES"
      "reduction prefetch forced|TANDEM_OPENMP_REDUCE_PREFETCH=l1:4096|0|stores chosen by: .*reduction prefetch from TANDEM_OPENMP_REDUCE_PREFETCH.*reduction prefetch: 4096 bytes ahead into L1"
      "refused: reduction prefetch of 100 bytes|TANDEM_OPENMP_REDUCE_PREFETCH=l2:100|2|TANDEM_OPENMP_REDUCE_PREFETCH='l2:100'.*a multiple of 64"
      "refused: the sums' loops of no ISA|TANDEM_OPENMP_REDUCE_ISA=sse|2|TANDEM_OPENMP_REDUCE_ISA='sse' is not one of generic, avx2 or avx512"
      "parallel threshold measured on first use and read back|OMP_NUM_THREADS=2|0|parallel from: [0-9]+ elements \\(smaller loops run on the calling thread\\).*parallel from chosen by: cached in ${tuning_cache}/openmp-parallel-[0-9a-f]+\\.txt.*parallel from measured: the team's time over one thread's at 1K [0-9.]+, 2K [0-9.]+,.* 256K [0-9.]+"
      "parallel threshold from the table|TANDEM_TUNING=table|0|parallel from: 32768 elements .*parallel from chosen by: table"
      "parallel threshold forced|TANDEM_OPENMP_PARALLEL_FROM=4096|0|parallel from: 4096 elements .*parallel from chosen by: TANDEM_OPENMP_PARALLEL_FROM"
      "matmul parallel threshold measured on first use and read back|OMP_NUM_THREADS=2|0|matmul parallel from: [0-9^]+ multiply-adds \\(smaller register_blocked products run on the calling thread\\).*matmul parallel from chosen by: (calibrated now \\([0-9]+ ms\\). )?cached in ${tuning_cache}/openmp-matmul-parallel-[0-9a-f]+\\.txt.*matmul parallel from measured: f32 chained: the team's time over one thread's at 32\\^3 [0-9.]+, 48\\^3 [0-9.]+,.* 256\\^3 [0-9.]+"
      "matmul parallel threshold read back from the cache|OMP_NUM_THREADS=2|0|matmul parallel from chosen by: cached in ${tuning_cache}/openmp-matmul-parallel-[0-9a-f]+\\.txt"
      "matmul parallel threshold from the table|TANDEM_TUNING=table|0|matmul parallel from: 128\\^3 multiply-adds .*matmul parallel from chosen by: table"
      "matmul parallel threshold not measured on one thread|OMP_NUM_THREADS=1|0|matmul parallel from: 128\\^3 multiply-adds .*matmul parallel from chosen by: table. not measured: first needed with a team of one thread"
      "refused: parallel threshold of lots|TANDEM_OPENMP_PARALLEL_FROM=lots|2|TANDEM_OPENMP_PARALLEL_FROM='lots': give the elements from which a loop runs on every thread")
  set(previous "")
  foreach(step IN LISTS tuning_steps)
    string(REPLACE "|" ";" fields "${step}")
    list(GET fields 0 what)
    list(GET fields 1 env)
    list(GET fields 2 rc)
    list(GET fields 3 regex)
    add_test(NAME "cli: openmp tuning ${what}"
             COMMAND ${CMAKE_COMMAND} "-DCOMMAND=$<TARGET_FILE:tandem_cli>;info" -DEXPECT_RC=${rc}
             "-DENV=TANDEM_CACHE_DIR=${tuning_cache};${env}" "-DEXPECT_REGEX=${regex}"
             -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/expect.cmake)
    set_tests_properties("cli: openmp tuning ${what}" PROPERTIES LABELS cli RESOURCE_LOCK tuning_cache)
    if(previous)
      set_tests_properties("cli: openmp tuning ${what}" PROPERTIES DEPENDS "${previous}")
    endif()
    set(previous "cli: openmp tuning ${what}")
  endforeach()
  add_test(NAME "cli: openmp tuning the reduction prefetch is read from the cache, and a file without it measured again"
           COMMAND ${CMAKE_COMMAND} -DTANDEM=$<TARGET_FILE:tandem_cli> -DDIR=${tuning_cache}
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/stores_cache_edited.cmake)
  set_tests_properties("cli: openmp tuning the reduction prefetch is read from the cache, and a file without it measured again"
                       PROPERTIES LABELS cli RESOURCE_LOCK tuning_cache DEPENDS "${previous}")
  add_test(NAME "cli: openmp tuning the sums' loops forced, refused and read back from the cache"
           COMMAND ${CMAKE_COMMAND} -DTANDEM=$<TARGET_FILE:tandem_cli> -DDIR=${tuning_cache}
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/sums_isa.cmake)
  set_tests_properties("cli: openmp tuning the sums' loops forced, refused and read back from the cache" PROPERTIES
                       LABELS cli RESOURCE_LOCK tuning_cache DEPENDS "${previous}" SKIP_REGULAR_EXPRESSION "SKIPPED:")
  add_test(NAME "cli: openmp tuning an edited gemm cache entry is measured again"
           COMMAND ${CMAKE_COMMAND} -DTANDEM=$<TARGET_FILE:tandem_cli> -DDIR=${tuning_cache}
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/gemm_cache_edited.cmake)
  set_tests_properties("cli: openmp tuning an edited gemm cache entry is measured again" PROPERTIES LABELS cli
                       RESOURCE_LOCK tuning_cache DEPENDS "${previous}")
  add_test(NAME "cli: openmp tuning each ISA's kernels have a store cache entry of their own"
           COMMAND ${CMAKE_COMMAND} -DTANDEM=$<TARGET_FILE:tandem_cli> -DDIR=${tuning_cache}
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/stores_cache_per_isa.cmake)
  set_tests_properties("cli: openmp tuning each ISA's kernels have a store cache entry of their own" PROPERTIES
                       LABELS cli RESOURCE_LOCK tuning_cache DEPENDS "${previous}" SKIP_REGULAR_EXPRESSION "SKIPPED:")
endif()
