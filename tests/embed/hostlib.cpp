// The host's library, built on tandem.
#include <tandem/tandem.hpp>
#include <vector>

double host_sum(const std::vector<float>& v) {
  tandem::Backend& be = tandem::get_backend("reference");
  return tandem::sum(tandem::Buffer::from(be, v));
}
