# Builds libtandem static (with the host dependencies a static package must hand on: OpenMP,
# OpenBLAS, zlib, MPI, Boost.Context), installs it, and builds and runs tests/consumer against it
# with find_package(tandem): tandemConfig.cmake must find every dependency itself. A Release
# package compiled without optimisation (-O0; the ISA kernels keep their own -O3): the test checks
# the packaging, not the speed, and on a 2-vCPU Zen 3 VM -O3 compiled in 369 CPU-s, -O0 in 215.
#   cmake -DSOURCE_DIR=... -DWORK_DIR=... -P static_package.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -G Ninja -DCMAKE_BUILD_TYPE=Release
                        "-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DNDEBUG"
                        -DTANDEM_SHARED=OFF -DTANDEM_BUILD_TESTS=OFF -DTANDEM_BUILD_BENCH=OFF -DTANDEM_BUILD_CLI=OFF
                        -DTANDEM_BUILD_EXAMPLES=OFF -DTANDEM_ENABLE_CUDA=OFF -DTANDEM_ENABLE_HIP=OFF
                        -DTANDEM_ENABLE_KOKKOS=OFF -DTANDEM_ENABLE_OPENMP=ON -DTANDEM_ENABLE_BLAS=ON
                        -DTANDEM_ENABLE_ZLIB=ON -DTANDEM_ENABLE_MPI=ON -DTANDEM_ENABLE_SIM=ON
                COMMAND_ERROR_IS_FATAL ANY OUTPUT_QUIET)
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build" COMMAND_ERROR_IS_FATAL ANY OUTPUT_QUIET)
execute_process(COMMAND ${CMAKE_COMMAND} --install "${WORK_DIR}/build" --prefix "${WORK_DIR}/prefix"
                COMMAND_ERROR_IS_FATAL ANY OUTPUT_QUIET)
file(GLOB_RECURSE archives "${WORK_DIR}/prefix/*/libtandem.a")
if(NOT archives)
  message(FATAL_ERROR "no libtandem.a was installed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/consumer" -B "${WORK_DIR}/consumer" -G Ninja
                        "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" "-DQUICKSTART=${SOURCE_DIR}/examples/quickstart.cpp"
                        -DCMAKE_BUILD_TYPE=Release
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/consumer" COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND "${WORK_DIR}/consumer/app" OUTPUT_VARIABLE out COMMAND_ERROR_IS_FATAL ANY)
if(NOT out MATCHES "sum\\(x \\+ w\\) = 24.5, C = \\[7.5 2; 18 2\\]")
  message(FATAL_ERROR "the static consumer printed an unexpected result: ${out}")
endif()
message(STATUS "static consumer ran: ${out}")
