// The openmp backend's tensor_core tier (matmul_amx.cpp): bf16 products on Intel AMX tiles, or
// with AVX512-BF16's vdpbf16ps on CPUs that have that and no AMX.
#pragma once

#include <string>

#include "tandem/backend.hpp"

namespace tandem::openmp {

// Whether this CPU, its OS and this process can run AMX-BF16 (asked once; the first call requests
// the tile-data permission Linux requires); `why` gets the reason when not.
bool amx_bf16(std::string* why = nullptr);
// What runs a bf16 block: AMX tiles (tdpbf16ps) or AVX-512 registers (vdpbf16ps).
enum class Bf16Engine { amx, avx512bf16 };
// C (f32) = alpha op(A) op(B) + beta C for bf16 A and B, packed as bf16 (never widened), f32
// accumulation; Unsupported where the engine cannot run (amx_bf16(), host::cpu_has_avx512bf16()).
// (Named for amx, the file's ISA, as tests/isa_objects.sh asks of every strong symbol there.)
void matmul_amx_bf16(const GemmArgs& g, Bf16Engine engine);

}  // namespace tandem::openmp
