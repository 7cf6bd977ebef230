#!/usr/bin/env bash
# ci/gpu-provenance.sh FILE CHECK [DEVICE DRIVER]: writes FILE, the record of one run of the GPU
# kernels on hardware: the device and driver (default: nvidia-smi's first GPU), the date, the
# commit, what `tandem check` said (CHECK: "passed", or how it failed), and the SHA-256 of every
# kernel source (include/tandem/gpu/*.hpp, backends/gpu/kernels/*.hpp) with their combined hash,
# computed as cmake/TandemGpuSources.cmake does. ci/gpu.sh calls it after the check; committed as
# bench/results/gpu-kernel-sources-<device>.json, it tells `tandem info` and the scan's defaults
# which kernel sources ran where.
set -euo pipefail
file=${1:?usage: ci/gpu-provenance.sh FILE CHECK [DEVICE DRIVER]}
check=${2:?usage: ci/gpu-provenance.sh FILE CHECK [DEVICE DRIVER]}
root=$(cd "$(dirname "$0")/.." && pwd)
device=${3:-}
driver=${4:-}
if [ -z "$device" ] && command -v nvidia-smi >/dev/null; then
  device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
fi
device=${device:-unknown}
driver=${driver:-unknown}
cd "$root"
lines=$(ls include/tandem/gpu/*.hpp backends/gpu/kernels/*.hpp | LC_ALL=C sort | xargs sha256sum)
hash=$(printf '%s\n' "$lines" | sha256sum | cut -c1-16)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
json_text() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g'; }
{
  echo "{"
  echo "  \"device\": \"$(json_text "$device")\","
  echo "  \"driver\": \"$(json_text "$driver")\","
  echo "  \"date\": \"$(date -u +%Y-%m-%d)\","
  echo "  \"commit\": \"$commit\","
  echo "  \"check\": \"$(json_text "$check")\","
  echo "  \"hash\": \"$hash\","
  echo "  \"files\": {"
  printf '%s\n' "$lines" | awk '{ printf "%s    \"%s\": \"%s\"", (NR > 1 ? ",\n" : ""), $2, $1 } END { print "" }'
  echo "  }"
  echo "}"
} >"$file"
echo "gpu-provenance: kernel sources $hash on $device ($check) -> $file"
