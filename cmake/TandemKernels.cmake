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
# A backend tandem was built without is a configure error, as is an unknown name.
#
# In tandem's own build the variables below are tandem's; an installed tandem's package sets them
# (tandemConfig.cmake) before including this file.
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
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/tandem_kernels/${target}")
  file(MAKE_DIRECTORY "${dir}")  # for the HIP objects: Makefile generators do not make it
  target_link_libraries(${target} PRIVATE ${lib})

  if(host)
    if(NOT TANDEM_ENABLE_SIM_ON)
      message(FATAL_ERROR "${usage}: tandem was built without the simulator (TANDEM_ENABLE_SIM), whose fiber "
                          "engine runs kernels on openmp, sim and reference; rebuild tandem with it")
    endif()
    target_sources(${target} PRIVATE ${files})
  endif()

  if(cuda)
    if(NOT TANDEM_ENABLE_CUDA_ON)
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
      file(CONFIGURE OUTPUT "${dir}/${stem}.cu" CONTENT "#include \"${file}\"\n")
      list(APPEND cuda_files "${dir}/${stem}.cu")
    endforeach()
    add_library(${target}_kernels_cuda OBJECT ${cuda_files})
    target_link_libraries(${target}_kernels_cuda PRIVATE ${lib})
    target_include_directories(${target}_kernels_cuda PRIVATE $<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>)
    target_compile_definitions(${target}_kernels_cuda PRIVATE $<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>)
    set_target_properties(${target}_kernels_cuda PROPERTIES CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON
                                                            POSITION_INDEPENDENT_CODE ON)
    target_compile_options(${target}_kernels_cuda PRIVATE --extended-lambda --expt-relaxed-constexpr)
    target_link_libraries(${target} PRIVATE ${target}_kernels_cuda CUDA::cudart)
  endif()

  if(hip)
    if(NOT TANDEM_ENABLE_HIP_ON OR NOT TANDEM_HIP_CLANG)
      message(FATAL_ERROR "${usage}: tandem was built without the hip backend (TANDEM_ENABLE_HIP)")
    endif()
    set(archs ${CMAKE_HIP_ARCHITECTURES})
    if(NOT archs)
      set(archs gfx90a gfx1030)
    endif()
    set(flags -x hip -std=c++20 -O3 -fPIC --rocm-path=/usr --rocm-device-lib-path=${TANDEM_HIP_DEVICE_LIB_DIR})
    foreach(arch IN LISTS archs)
      list(APPEND flags --offload-arch=${arch})
    endforeach()
    # The target's include directories and definitions, empty entries dropped (a bare -I or -D).
    set(includes "$<FILTER:$<TARGET_PROPERTY:${lib},INTERFACE_INCLUDE_DIRECTORIES>;$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>,EXCLUDE,^$>")
    set(defines "$<FILTER:$<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>,EXCLUDE,^$>")
    foreach(file IN LISTS files)
      get_filename_component(stem "${file}" NAME_WE)
      set(object "${dir}/${stem}.hip.o")
      add_custom_command(
        OUTPUT "${object}"
        COMMAND ${TANDEM_HIP_CLANG} ${flags} "$<$<BOOL:${includes}>:-I$<JOIN:${includes},;-I>>"
                "-I${TANDEM_HIP_INCLUDE_DIR}" "$<$<BOOL:${defines}>:-D$<JOIN:${defines},;-D>>" -MD -MF "${object}.d"
                -c "${file}" -o "${object}"
        DEPENDS "${file}"
        DEPFILE "${object}.d"
        COMMENT "HIP: compiling ${stem} for ${target} (${archs})"
        COMMAND_EXPAND_LISTS VERBATIM)
      set_source_files_properties("${object}" PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
      target_sources(${target} PRIVATE "${object}")
    endforeach()
    target_link_libraries(${target} PRIVATE ${TANDEM_AMDHIP64})
  endif()
endfunction()
