# Builds tests/embed, a host project that takes tandem in with add_subdirectory (WAY=subdirectory)
# or FetchContent from a git clone of SOURCE_DIR (WAY=fetch: its committed HEAD), and runs the
# host's own quickstart. The host's CMakeLists checks that tandem behaved as a guest.
#   cmake -DSOURCE_DIR=... -DWORK_DIR=... -DWAY=subdirectory|fetch -P embed.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
if(WAY STREQUAL "fetch")
  find_program(GIT git)
  if(NOT GIT OR NOT EXISTS "${SOURCE_DIR}/.git")
    message("SKIPPED: FetchContent needs a git clone of tandem and git (the source is not one)")
    return()
  endif()
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/embed" -B "${WORK_DIR}/build" -G Ninja
                        "-DTANDEM_WAY=${WAY}" "-DTANDEM_SOURCE=${SOURCE_DIR}"
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build" COMMAND_ERROR_IS_FATAL ANY OUTPUT_QUIET)
execute_process(COMMAND "${WORK_DIR}/build/quickstart" OUTPUT_VARIABLE out COMMAND_ERROR_IS_FATAL ANY)
if(NOT out MATCHES "host sum = 7")
  message(FATAL_ERROR "the host's quickstart printed an unexpected result: ${out}")
endif()
message(STATUS "host ran: ${out}")
execute_process(COMMAND "${WORK_DIR}/build/host_kernels" openmp sim OUTPUT_VARIABLE out COMMAND_ERROR_IS_FATAL ANY)
if(NOT out MATCHES "openmp .*: ok.*sim .*: ok")
  message(FATAL_ERROR "the host's own kernels printed an unexpected result: ${out}")
endif()
message(STATUS "host kernels ran: ${out}")
