# The library examples of the README and docs/ must be examples/quickstart.cpp and
# examples/train_digits.cpp verbatim (which the build compiles and the tests run), so the
# documentation never shows code that does not build.
file(READ "${SOURCE_DIR}/README.md" readme)
file(GLOB pages "${SOURCE_DIR}/docs/*.md")
foreach(page IN LISTS pages)
  file(READ "${page}" text)
  string(APPEND readme "${text}")
endforeach()
foreach(name quickstart train_digits)
  file(READ "${SOURCE_DIR}/examples/${name}.cpp" example)
  string(FIND "${readme}" "${example}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "neither README.md nor docs/ contains examples/${name}.cpp verbatim; copy the file into its code block")
  endif()
endforeach()
