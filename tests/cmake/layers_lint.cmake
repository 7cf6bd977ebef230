# Layers point one way (ARCHITECTURE.md): nothing in core/ includes the headers of what is built
# on it (the public ops, verification, the ML and data layers, tandem::dist) or algorithms/.
# Run as: cmake -DSOURCE_DIR=... -P layers_lint.cmake
file(GLOB sources ${SOURCE_DIR}/core/*.cpp ${SOURCE_DIR}/core/*.hpp)
set(pattern "#include [<\"](tandem/(ops|verify|mlp|regression|data|dist)\\.hpp|[./]*algorithms/)")
set(found "")
foreach(f IN LISTS sources)
  file(STRINGS ${f} lines REGEX "${pattern}")
  foreach(line IN LISTS lines)
    string(APPEND found "\n  ${f}: ${line}")
  endforeach()
endforeach()
if(found)
  message(FATAL_ERROR "core/ includes a layer above it (move the code that needs it up, as Buffer::fill "
                      "moved to algorithms/ops.cpp):${found}")
endif()
message(STATUS "layers_lint: core/ includes nothing above it")
