# tandem_add_kernels(<target> SOURCES <file>... BACKENDS <backend>...)
#
# Compiles each kernels file (tandem/kernels.hpp: kernels, the functions that launch them,
# TANDEM_EXPORT) into <target> once per kind of backend named (docs/kernels.md):
#   openmp, sim, sim64, reference, kokkos  the host compiler, with the target's own flags (once
#                                          for all of them); needs tandem built with the simulator,
#                                          whose fiber engine runs the kernels' GPU threads on the CPU
#   cuda                                   nvcc (the project enables the CUDA language first;
#                                          CMAKE_CUDA_ARCHITECTURES as for any CUDA source)
#   hip                                    clang -x hip for CMAKE_HIP_ARCHITECTURES (default gfx90a
#                                          and gfx1030), with the target's include directories and
#                                          compile definitions
# A backend tandem was built without is a configure error, as is an unknown name. <target> and
# whatever links it get TANDEM_KERNELS_HOST, _CUDA, _HIP for the kinds compiled: TANDEM_IMPORT then
# references those compilations (a static library's are linked in; a missing one fails to link).
# The target may be a library or an executable, in any directory; call it more than once to add
# more files.
#
# Which kinds tandem can compile is the global property TANDEM_KERNEL_KINDS (host, cuda, hip),
# set by tandem's own build (so add_subdirectory and FetchContent see it) or by an installed
# tandem's package (tandemConfig.cmake), with the HIP toolchain in TANDEM_HIP_CLANG,
# TANDEM_HIP_INCLUDE_DIR, TANDEM_HIP_DEVICE_LIB_DIR and TANDEM_AMDHIP64.
include_guard(GLOBAL)

function(tandem_add_kernels target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;BACKENDS")
  set(usage "tandem_add_kernels(${target} SOURCES <file>... BACKENDS <backend>...)")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${usage}: unexpected ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "${usage}: no target ${target} (add_executable or add_library first)")
  endif()
  if(NOT arg_SOURCES OR NOT arg_BACKENDS)
    message(FATAL_ERROR "${usage}: give at least one source and one backend")
  endif()
  if(TARGET tandem::tandem)
    set(lib tandem::tandem)
  else()
    set(lib tandem)
  endif()

  set(host OFF)
  set(cuda OFF)
  set(hip OFF)
  foreach(backend IN LISTS arg_BACKENDS)
    if(backend MATCHES "^(openmp|sim|sim64|reference|kokkos)$")
      set(host ON)
    elseif(backend STREQUAL "cuda")
      set(cuda ON)
    elseif(backend STREQUAL "hip")
      set(hip ON)
    else()
      message(FATAL_ERROR "${usage}: unknown backend '${backend}' (openmp, sim, sim64, reference, kokkos, cuda, hip)")
    endif()
  endforeach()

  set(files)
  foreach(source IN LISTS arg_SOURCES)
    get_filename_component(file "${source}" ABSOLUTE)
    if(NOT EXISTS "${file}")
      message(FATAL_ERROR "${usage}: no source ${file}")
    endif()
    list(APPEND files "${file}")
  endforeach()
  # This call's outputs, apart from earlier calls' for the target: a number per call.
  get_property(calls TARGET ${target} PROPERTY TANDEM_KERNELS_CALLS)
  if(NOT calls)
    set(calls 0)
  endif()
  math(EXPR calls "${calls} + 1")
  set_property(TARGET ${target} PROPERTY TANDEM_KERNELS_CALLS ${calls})
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/tandem_kernels/${target}/${calls}")
  file(MAKE_DIRECTORY "${dir}")  # for the HIP objects: Makefile generators do not make it
  target_link_libraries(${target} PUBLIC ${lib})  # whoever links a kernels library imports from it
  get_property(built GLOBAL PROPERTY TANDEM_KERNEL_KINDS)

  if(host)
    if(NOT "host" IN_LIST built)
      message(FATAL_ERROR "${usage}: tandem was built without the simulator (TANDEM_ENABLE_SIM), whose fiber "
                          "engine runs kernels on openmp, sim and reference; rebuild tandem with it")
    endif()
    target_sources(${target} PRIVATE ${files})
    target_compile_definitions(${target} PUBLIC TANDEM_KERNELS_HOST)
  endif()

  if(cuda)
    if(NOT "cuda" IN_LIST built)
      message(FATAL_ERROR "${usage}: tandem was built without the cuda backend (TANDEM_ENABLE_CUDA)")
    endif()
    get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
    if(NOT "CUDA" IN_LIST languages)
      message(FATAL_ERROR "${usage}: BACKENDS cuda needs the CUDA language: enable_language(CUDA) first")
    endif()
    find_package(CUDAToolkit REQUIRED)
    # nvcc compiles a .cu that includes the file: one source, two languages in one directory.
    set(cuda_files)
    foreach(file IN LISTS files)
      get_filename_component(stem "${file}" NAME_WE)
      string(MD5 key "${file}")
      string(SUBSTRING "${key}" 0 8 key)
      file(CONFIGURE OUTPUT "${dir}/${stem}-${key}.cu" CONTENT "#include \"${file}\"\n")
      list(APPEND cuda_files "${dir}/${stem}-${key}.cu")
    endforeach()
    set(objects ${target}_kernels_cuda_${calls})
    add_library(${objects} OBJECT ${cuda_files})
    target_link_libraries(${objects} PRIVATE ${lib})
    target_include_directories(${objects} PRIVATE $<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>)
    target_compile_definitions(${objects} PRIVATE $<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>)
    set_target_properties(${objects} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    # C++20 by flag: CMake 3.25 does not know nvcc's dialect option (CUDA_STANDARD 20 fails there).
    target_compile_options(${objects} PRIVATE -std=c++20 --extended-lambda --expt-relaxed-constexpr)
    target_link_libraries(${target} PRIVATE ${objects} CUDA::cudart)
    target_compile_definitions(${target} PUBLIC TANDEM_KERNELS_CUDA)
  endif()

  if(hip)
    if(NOT "hip" IN_LIST built OR NOT TANDEM_HIP_CLANG)
      message(FATAL_ERROR "${usage}: tandem was built without the hip backend (TANDEM_ENABLE_HIP)")
    endif()
    set(archs ${CMAKE_HIP_ARCHITECTURES})
    if(NOT archs)
      set(archs gfx90a gfx1030)
    endif()
    get_filename_component(rocm "${TANDEM_HIP_INCLUDE_DIR}" DIRECTORY)  # /usr for Debian's ROCm
    set(flags -x hip -std=c++20 -O3 -fPIC --rocm-path=${rocm} --rocm-device-lib-path=${TANDEM_HIP_DEVICE_LIB_DIR})
    foreach(arch IN LISTS archs)
      list(APPEND flags --offload-arch=${arch})
    endforeach()
    # The target's include directories and definitions, empty entries dropped (a bare -I or -D).
    set(includes "$<FILTER:$<TARGET_PROPERTY:${lib},INTERFACE_INCLUDE_DIRECTORIES>;$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>,EXCLUDE,^$>")
    set(defines "$<FILTER:$<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>,EXCLUDE,^$>")
    set(objects)
    foreach(file IN LISTS files)
      get_filename_component(stem "${file}" NAME_WE)
      string(MD5 key "${file}")
      string(SUBSTRING "${key}" 0 8 key)
      set(object "${dir}/${stem}-${key}.hip.o")
      list(APPEND objects "${object}")
      add_custom_command(
        OUTPUT "${object}"
        COMMAND ${TANDEM_HIP_CLANG} ${flags} "$<$<BOOL:${includes}>:-I$<JOIN:${includes},;-I>>"
                "-I${TANDEM_HIP_INCLUDE_DIR}" "$<$<BOOL:${defines}>:-D$<JOIN:${defines},;-D>>" -MD -MF "${object}.d"
                -c "${file}" -o "${object}"
        DEPENDS "${file}"
        DEPFILE "${object}.d"
        COMMENT "HIP: compiling ${stem} for ${target} (${archs})"
        COMMAND_EXPAND_LISTS VERBATIM)
    endforeach()
    # The rules live in this directory: a target here owns them, and the target, wherever it was
    # made, links their objects (marked generated in its own directory).
    add_custom_target(${target}_kernels_hip_${calls} DEPENDS ${objects})
    add_dependencies(${target} ${target}_kernels_hip_${calls})
    set_source_files_properties(${objects} TARGET_DIRECTORY ${target} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
    target_sources(${target} PRIVATE ${objects})
    target_link_libraries(${target} PRIVATE ${TANDEM_AMDHIP64})
    target_compile_definitions(${target} PUBLIC TANDEM_KERNELS_HIP)
  endif()
endfunction()
