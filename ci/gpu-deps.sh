#!/usr/bin/env bash
# ci/gpu-deps.sh: copies the header-only build dependencies (doctest, CLI11, nlohmann/json) from
# this machine's Debian packages into .deps/ (git-ignored), headers and CMake packages, for a
# machine that has none of them and no network (the GPU machine): carry .deps/ there and
# ci/gpu.sh finds them (CMAKE_PREFIX_PATH). Run here, after ci/install-deps.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deps="$root/.deps"
copy() {  # copy SOURCE DEST-FOLDER (under .deps)
  [ -e "$1" ] || { echo "gpu-deps: $1 is missing (run ci/install-deps.sh first)" >&2; exit 1; }
  mkdir -p "$deps/$2"
  cp -r "$1" "$deps/$2/"
}
rm -rf "$deps"
copy /usr/include/doctest include
copy /usr/lib/cmake/doctest lib/cmake
copy /usr/include/CLI include
copy /usr/share/cmake/CLI11 share/cmake
copy /usr/include/nlohmann include
copy /usr/share/cmake/nlohmann_json share/cmake
echo "gpu-deps: $(du -sh "$deps" | cut -f1) in $deps"
