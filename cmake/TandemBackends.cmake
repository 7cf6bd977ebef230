# The one list of the backends tandem knows: one row each, in the order `tandem info` and
# `tandem --help` list them. Everything else that names backends comes from it: the registry's
# table (a generated header, tandem_backends.inc, that core/registry.cpp includes: the kind, the
# order of "auto", the reason an absent one is absent), the modules (TANDEM_MODULE_CANDIDATES: the
# install rules, the wheel, the module tests), the per-backend CTest registrations and their
# host/device split (tests/CMakeLists.txt), and the configure summary. A new backend is its folder
# (which defines tandem::detail::<name>_device_count and make_<name>_backend) plus one row here.
#
#   KIND      cpu (its buffers are host memory), gpu (device memory) or simulator (runs the GPU
#             kernels on the CPU); kokkos is cpu, what Debian's Kokkos runs on (one built for a GPU
#             execution space says gpu in its properties, and its host-memory tests print SKIPPED)
#   AUTO      its place in the order "auto" tries (1 first); none: "auto" never picks it
#   MODULE    a run-time module, libtandem-<name>.so, in shared builds (it needs a vendor runtime)
#   OPTION    the TANDEM_ENABLE_<OPTION> that builds it (none: always built, with the core)
#   FOLDER    its folder under backends/, added when OPTION is on (default: the name; two
#             backends may share one)
#   HOW       how a user gets it when this library was built without it
set(TANDEM_BACKENDS "")
set(TANDEM_MODULE_CANDIDATES "")
function(tandem_backend name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "MODULE" "KIND;AUTO;OPTION;FOLDER;HOW" "")
  if(NOT arg_FOLDER)
    set(arg_FOLDER ${name})
  endif()
  if(NOT arg_KIND MATCHES "^(cpu|gpu|simulator)$")
    message(FATAL_ERROR "tandem_backend(${name}): KIND must be cpu, gpu or simulator")
  endif()
  set(tandem_backend_${name}_kind ${arg_KIND} PARENT_SCOPE)
  set(tandem_backend_${name}_auto "${arg_AUTO}" PARENT_SCOPE)
  set(tandem_backend_${name}_option "${arg_OPTION}" PARENT_SCOPE)
  set(tandem_backend_${name}_how "${arg_HOW}" PARENT_SCOPE)
  set(tandem_backend_${name}_folder ${arg_FOLDER} PARENT_SCOPE)
  set(TANDEM_BACKENDS ${TANDEM_BACKENDS} ${name} PARENT_SCOPE)
  if(arg_MODULE)
    set(TANDEM_MODULE_CANDIDATES ${TANDEM_MODULE_CANDIDATES} ${name} PARENT_SCOPE)
  endif()
endfunction()

set(tandem_sim_how "configure with -DTANDEM_ENABLE_SIM=ON (needs libboost-context-dev)")
tandem_backend(cuda      KIND gpu       AUTO 1 MODULE OPTION CUDA
               HOW "configure with -DTANDEM_ENABLE_CUDA=ON (needs the CUDA toolkit)")
tandem_backend(hip       KIND gpu       AUTO 2 MODULE OPTION HIP
               HOW "configure with -DTANDEM_ENABLE_HIP=ON (needs ROCm: hipcc, libamdhip64-dev)")
tandem_backend(openmp    KIND cpu       AUTO 3        OPTION OPENMP
               HOW "configure with -DTANDEM_ENABLE_OPENMP=ON (needs OpenMP)")
tandem_backend(kokkos    KIND cpu              MODULE OPTION KOKKOS
               HOW "configure with -DTANDEM_ENABLE_KOKKOS=ON (needs Kokkos: libtrilinos-kokkos-dev)")
tandem_backend(sim       KIND simulator               OPTION SIM HOW "${tandem_sim_how}")
tandem_backend(sim64     KIND simulator               OPTION SIM FOLDER sim HOW "${tandem_sim_how}")
tandem_backend(reference KIND cpu       AUTO 4)

# The backends of one kind (cpu, gpu, simulator), in the list's order.
function(tandem_backends_of_kind kind out)
  set(list "")
  foreach(b IN LISTS TANDEM_BACKENDS)
    if(tandem_backend_${b}_kind STREQUAL kind)
      list(APPEND list ${b})
    endif()
  endforeach()
  set(${out} ${list} PARENT_SCOPE)
endfunction()

# add_subdirectory of each enabled backend's folder, once each (sim and sim64 share one).
macro(tandem_add_backend_folders)
  set(tandem_added_folders "")
  foreach(b IN LISTS TANDEM_BACKENDS)
    set(tandem_folder ${tandem_backend_${b}_folder})
    set(tandem_option_name ${tandem_backend_${b}_option})
    if(tandem_option_name AND TANDEM_ENABLE_${tandem_option_name}_ON AND NOT tandem_folder IN_LIST tandem_added_folders)
      add_subdirectory(backends/${tandem_folder})
      list(APPEND tandem_added_folders ${tandem_folder})
    endif()
  endforeach()
endmacro()

# Writes the registry's table into `file` for the backends enabled in this configuration, one a
# line: TANDEM_BUILT_BACKEND(name, kind, auto), TANDEM_MODULE_BACKEND(name, kind, auto) or
# TANDEM_ABSENT_BACKEND(name, kind, auto, "why"); auto is 0 where "auto" never picks it.
function(tandem_write_backend_table file)
  set(rows "")
  set(summary "")
  foreach(b IN LISTS TANDEM_BACKENDS)
    set(option ${tandem_backend_${b}_option})
    set(auto ${tandem_backend_${b}_auto})
    if(NOT auto)
      set(auto 0)
    endif()
    set(columns "${b}, ${tandem_backend_${b}_kind}, ${auto}")
    tandem_backend_is_module(${b} is_module)
    if(is_module AND TANDEM_ENABLE_${option}_ON)
      string(APPEND rows "TANDEM_MODULE_BACKEND(${columns})\n")
      list(APPEND summary "${b} ON (module)")
    elseif(NOT option OR TANDEM_ENABLE_${option}_ON)
      string(APPEND rows "TANDEM_BUILT_BACKEND(${columns})\n")
      list(APPEND summary "${b} ON")
    else()
      string(APPEND rows "TANDEM_ABSENT_BACKEND(${columns}, \"not built into this library: ${tandem_backend_${b}_how}\")\n")
      list(APPEND summary "${b} OFF")
    endif()
  endforeach()
  file(CONFIGURE OUTPUT ${file}
       CONTENT "// Generated by cmake/TandemBackends.cmake from TANDEM_BACKENDS; do not edit.\n${rows}")
  list(JOIN summary ", " summary)
  set(TANDEM_BACKEND_SUMMARY "${summary}" PARENT_SCOPE)
endfunction()

# ---- backend modules ----
# In a shared build (TANDEM_BACKEND_MODULES, on by default there) the backends that need a vendor
# runtime (MODULE above) are run-time modules, libtandem-<name>.so, loaded on first use
# (core/modules.cpp): a libtandem built with CUDA, HIP and Kokkos still loads where none of them
# is installed. A static build links every backend in.

# Whether backend `name` is a module in this configuration.
function(tandem_backend_is_module name out)
  if(TANDEM_BACKEND_MODULES AND name IN_LIST TANDEM_MODULE_CANDIDATES)
    set(${out} ON PARENT_SCOPE)
  else()
    set(${out} OFF PARENT_SCOPE)
  endif()
endfunction()

# The target backend folder `name` adds its sources, definitions and libraries to: the module
# tandem_<name> (beside libtandem in the build tree, lib/tandem/ when installed), else tandem.
function(tandem_backend_target name out)
  tandem_backend_is_module(${name} is_module)
  if(NOT is_module)
    set(${out} tandem PARENT_SCOPE)
    return()
  endif()
  set(target tandem_${name})
  set(entry ${PROJECT_BINARY_DIR}/generated/module_${name}.cpp)
  file(CONFIGURE OUTPUT ${entry} CONTENT "// Generated by cmake/TandemBackends.cmake: the entry points of libtandem-${name}.so.
#include \"${PROJECT_SOURCE_DIR}/core/module_abi.hpp\"
TANDEM_BACKEND_MODULE(${name})
")
  add_library(${target} MODULE ${entry})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME tandem-${name} PREFIX lib
                                             INSTALL_RPATH "$ORIGIN/.." INSTALL_RPATH_USE_LINK_PATH ON)
  if(NOT CMAKE_LIBRARY_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY $<TARGET_FILE_DIR:tandem>)
  endif()
  target_link_libraries(${target} PRIVATE tandem $<BUILD_INTERFACE:tandem_warnings>)
  target_compile_definitions(${target} PRIVATE TANDEM_MODULE_CONTRACT="${TANDEM_MODULE_CONTRACT}")
  target_link_options(${target} PRIVATE -Wl,--no-undefined)  # every symbol found at build time
  install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/tandem)
  set(${out} ${target} PARENT_SCOPE)
endfunction()

# TANDEM_MODULE_CONTRACT: a hash of the headers module and library share (include/tandem and
# core/module_abi.hpp), so that a module built from other headers is refused at load.
function(tandem_module_contract out)
  file(GLOB_RECURSE headers ${PROJECT_SOURCE_DIR}/include/tandem/*.hpp)
  list(APPEND headers ${PROJECT_SOURCE_DIR}/core/module_abi.hpp)
  list(SORT headers)
  set(digests "")
  foreach(h IN LISTS headers)
    file(SHA256 ${h} d)
    string(APPEND digests ${d})
  endforeach()
  string(SHA256 all "${digests}")
  string(SUBSTRING ${all} 0 16 all)
  set(${out} ${all} PARENT_SCOPE)
endfunction()
