// Each ISA's openmp backend and calibration loops (kernels.inl, compiled once per ISA by
// kernels_<isa>.cpp: generic x86-64, AVX2 + FMA, AVX-512). make_openmp_backend and
// calibration_loops (openmp_backend.cpp) take those of kernels_isa(); the AVX-512 backend also
// reads large sums with sum_loops_avx2 where the calibration chose it (StoreTuning::narrow_sums).
#pragma once

#include <memory>

#include "openmp_backend.hpp"

namespace tandem::openmp {

std::shared_ptr<Backend> make_openmp_backend_avx512();
std::shared_ptr<Backend> make_openmp_backend_avx2();
std::shared_ptr<Backend> make_openmp_backend_generic();
const CalibrationLoops& calibration_loops_avx512();
const CalibrationLoops& calibration_loops_avx2();
const CalibrationLoops& calibration_loops_generic();
const SumLoops& sum_loops_avx2();

}  // namespace tandem::openmp
