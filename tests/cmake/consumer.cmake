# Installs the build into a scratch prefix, builds tests/consumer against it with
# find_package(tandem CONFIG REQUIRED), and runs the result.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -P consumer.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix"
                COMMAND_ERROR_IS_FATAL ANY OUTPUT_QUIET)
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/consumer" -B "${WORK_DIR}/build"
                        "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" "-DQUICKSTART=${SOURCE_DIR}/examples/quickstart.cpp"
                        -DCMAKE_BUILD_TYPE=Release
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build" COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND "${WORK_DIR}/build/app" OUTPUT_VARIABLE out COMMAND_ERROR_IS_FATAL ANY)
message(STATUS "consumer ran: ${out}")
if(NOT out MATCHES "sum\\(x \\+ w\\) = 24.5, C = \\[7.5 2; 18 2\\]")
  message(FATAL_ERROR "the consumer printed an unexpected result: ${out}")
endif()
if(NOT EXISTS "${WORK_DIR}/prefix/bin/tandem")
  message(FATAL_ERROR "the CLI was not installed")
endif()
execute_process(COMMAND "${WORK_DIR}/prefix/bin/tandem" info COMMAND_ERROR_IS_FATAL ANY OUTPUT_QUIET)
