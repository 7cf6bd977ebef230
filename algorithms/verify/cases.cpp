#include "cases.hpp"

namespace tandem::verify {

std::vector<std::string> families() { return {"elementwise", "matrix", "matmul", "reduce", "scan", "ml"}; }

std::vector<CheckCase> cases(const Backend& backend, const CheckOptions& options) {
  std::vector<CheckCase> list;
  detail::add_elementwise_cases(list, backend, options);
  detail::add_matrix_cases(list, backend, options);
  detail::add_matmul_cases(list, backend, options);
  detail::add_reduce_cases(list, backend, options);
  detail::add_scan_cases(list, backend, options);
  detail::add_ml_cases(list, backend, options);
  return list;
}

}  // namespace tandem::verify
