// Every header the kernels of kernels.inl use, included by kernels_<isa>.cpp before the ISA's
// `#pragma GCC target`: their inline functions are then compiled for the baseline ISA, so the
// copy the linker keeps (one per program) runs on every CPU, while the kernels, defined after
// the pragma, inline them in their own ISA. Nothing in a header may be defined after it.
#pragma once

#include <omp.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "../../core/factories.hpp"
#include "kernels.hpp"
#include "openmp_backend.hpp"
#include "scan_isa.hpp"
#include "softmax_kernel.hpp"
#include "tandem/detail/apply_op.hpp"
#include "tandem/detail/scalar_math.hpp"
