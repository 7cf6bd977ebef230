# The README's library examples must be examples/quickstart.cpp and examples/train_digits.cpp
# verbatim (which the build compiles and the tests run), so the README never shows code that does
# not build.
file(READ "${SOURCE_DIR}/README.md" readme)
foreach(name quickstart train_digits)
  file(READ "${SOURCE_DIR}/examples/${name}.cpp" example)
  string(FIND "${readme}" "${example}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "README.md does not contain examples/${name}.cpp verbatim; copy the file into its code block")
  endif()
endforeach()
