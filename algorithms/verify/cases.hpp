#pragma once

#include "harness.hpp"

namespace tandem::verify::detail {

void add_elementwise_cases(std::vector<CheckCase>& out, const Backend& be, const CheckOptions& o);
void add_matrix_cases(std::vector<CheckCase>& out, const Backend& be, const CheckOptions& o);
void add_matmul_cases(std::vector<CheckCase>& out, const Backend& be, const CheckOptions& o);
void add_reduce_cases(std::vector<CheckCase>& out, const Backend& be, const CheckOptions& o);
void add_scan_cases(std::vector<CheckCase>& out, const Backend& be, const CheckOptions& o);
void add_ml_cases(std::vector<CheckCase>& out, const Backend& be, const CheckOptions& o);

}  // namespace tandem::verify::detail
