# The README's library example must be examples/quickstart.cpp verbatim (which the build and the
# consumer project compile), so the README never shows code that does not build.
file(READ "${SOURCE_DIR}/README.md" readme)
file(READ "${SOURCE_DIR}/examples/quickstart.cpp" example)
string(FIND "${readme}" "${example}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md does not contain examples/quickstart.cpp verbatim; copy the file into its code block")
endif()
