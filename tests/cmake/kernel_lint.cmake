# Fails when GPU kernel code calls a host function that nvcc accepts in device code (through
# --expt-relaxed-constexpr) but compiles wrongly there: <bit>'s functions call compiler built-ins
# that device code does not have, and nvcc folded std::countr_zero of any non-zero 64-bit mask to
# 64, which hung the look-back scan on a GPU. kernel_api.hpp has device versions
# (gpu::find_first_set). Run as: cmake -DSOURCE_DIR=... -P kernel_lint.cmake
file(GLOB sources ${SOURCE_DIR}/backends/gpu/kernels/*.hpp ${SOURCE_DIR}/include/tandem/gpu/*.hpp
     ${SOURCE_DIR}/include/tandem/detail/scalar_math.hpp ${SOURCE_DIR}/include/tandem/op_table.hpp
     ${SOURCE_DIR}/include/tandem/dtype.hpp ${SOURCE_DIR}/include/tandem/kernels.hpp)
set(pattern "std::(countr_zero|countl_zero|countr_one|countl_one|popcount|bit_width|bit_floor|bit_ceil|has_single_bit|rotl|rotr|byteswap)[ (<]|__builtin_(ctz|clz|popcount|ffs|parity)")
set(found "")
foreach(f IN LISTS sources)
  file(STRINGS ${f} lines REGEX "${pattern}")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "^[ ]*//")
      string(APPEND found "\n  ${f}: ${line}")
    endif()
  endforeach()
endforeach()
if(found)
  message(FATAL_ERROR "GPU kernel code calls <bit> functions or bit built-ins, which nvcc compiles wrongly in device "
                      "code; use gpu::find_first_set or add a device version to kernel_api.hpp:${found}")
endif()
list(LENGTH sources n)
message(STATUS "kernel_lint: ${n} kernel sources, no <bit> function or bit built-in in them")
