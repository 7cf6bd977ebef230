// The openmp backend's tensor_core tier (matmul_amx.cpp): bf16 products on Intel AMX tiles.
#pragma once

#include <string>

#include "tandem/backend.hpp"

namespace tandem::openmp {

// Whether this CPU, its OS and this process can run AMX-BF16 (asked once; the first call requests
// the tile-data permission Linux requires); `why` gets the reason when not.
bool amx_bf16(std::string* why = nullptr);
// C (f32) = alpha op(A) op(B) + beta C for bf16 A and B, on AMX tiles; Unsupported where
// amx_bf16() is false.
void matmul_amx_bf16(const GemmArgs& g);

}  // namespace tandem::openmp
