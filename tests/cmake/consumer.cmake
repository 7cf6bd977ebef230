# Installs the build into a scratch prefix, builds tests/consumer against it with
# find_package(tandem CONFIG REQUIRED), and runs the result.
# With -DKERNELS=ON (tandem has the simulator) it also builds and runs the user-kernel example
# through the installed tandem_add_kernels().
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... [-DKERNELS=ON] -P consumer.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix"
                COMMAND_ERROR_IS_FATAL ANY OUTPUT_QUIET)
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/consumer" -B "${WORK_DIR}/build"
                        "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" "-DQUICKSTART=${SOURCE_DIR}/examples/quickstart.cpp"
                        "-DEXAMPLES=${SOURCE_DIR}/examples"
                        -DCMAKE_BUILD_TYPE=Release
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build" COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND "${WORK_DIR}/build/app" OUTPUT_VARIABLE out COMMAND_ERROR_IS_FATAL ANY)
message(STATUS "consumer ran: ${out}")
if(NOT out MATCHES "sum\\(x \\+ w\\) = 24.5, C = \\[7.5 2; 18 2\\]")
  message(FATAL_ERROR "the consumer printed an unexpected result: ${out}")
endif()
# The user-kernel example, built by the installed tandem_add_kernels(), on openmp and sim.
if(KERNELS)
  execute_process(COMMAND "${WORK_DIR}/build/user_kernels" openmp sim OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  message(STATUS "user_kernels ran: ${out}")
  if(NOT rc EQUAL 0 OR NOT out MATCHES "openmp .*: ok" OR NOT out MATCHES "sim .*: ok")
    message(FATAL_ERROR "the user-kernel example built with the installed package failed (exit ${rc}): ${out}")
  endif()
endif()
if(NOT EXISTS "${WORK_DIR}/prefix/bin/tandem")
  message(FATAL_ERROR "the CLI was not installed")
endif()
execute_process(COMMAND "${WORK_DIR}/prefix/bin/tandem" info COMMAND_ERROR_IS_FATAL ANY OUTPUT_QUIET)

# pkg-config: compile and link the same program with the flags tandem.pc gives, then run it.
find_program(PKG_CONFIG NAMES pkg-config pkgconf REQUIRED)
file(GLOB_RECURSE pc_files "${WORK_DIR}/prefix/*/tandem.pc")
list(LENGTH pc_files pc_count)
if(NOT pc_count EQUAL 1)
  message(FATAL_ERROR "expected one installed tandem.pc, found: ${pc_files}")
endif()
get_filename_component(pc_dir "${pc_files}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs tandem OUTPUT_VARIABLE pc_flags OUTPUT_STRIP_TRAILING_WHITESPACE
                COMMAND_ERROR_IS_FATAL ANY)
message(STATUS "pkg-config --cflags --libs tandem: ${pc_flags}")
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
execute_process(COMMAND c++ "${SOURCE_DIR}/examples/quickstart.cpp" ${pc_flags} -o "${WORK_DIR}/pc_app"
                COMMAND_ERROR_IS_FATAL ANY)
# No LD_LIBRARY_PATH: the run path tandem.pc gives finds the library (it failed without one).
unset(ENV{LD_LIBRARY_PATH})
execute_process(COMMAND "${WORK_DIR}/pc_app" OUTPUT_VARIABLE out COMMAND_ERROR_IS_FATAL ANY)
if(NOT out MATCHES "sum\\(x \\+ w\\) = 24.5, C = \\[7.5 2; 18 2\\]")
  message(FATAL_ERROR "the program built with pkg-config printed an unexpected result: ${out}")
endif()
message(STATUS "pkg-config build ran: ${out}")
