// Quickstart: pick a backend, move data, run ops, read results back.
#include <cstdio>
#include <vector>

#include <tandem/tandem.hpp>

int main() try {
  // TANDEM_BACKEND=openmp|reference|cuda|... or the best one available.
  tandem::Backend& be = tandem::default_backend();

  const std::vector<float> h_x = {1, 2, 3, 4, 5, 6};
  const std::vector<float> h_w = {0.5f, -1, 2, 0, 1, 1};
  tandem::Buffer x = tandem::Buffer::from(be, h_x);
  tandem::Buffer w = tandem::Buffer::from(be, h_w);

  // y = x + w, elementwise; then the sum of y.
  tandem::Buffer y(be, tandem::DType::f32, h_x.size());
  tandem::add(x, w, y);
  const double total = tandem::sum(y);

  // C (2, 2) = A (2, 3) * B (3, 2): x and w viewed as row-major matrices.
  tandem::Buffer c(be, tandem::DType::f32, 4);
  tandem::Matrix cm = tandem::matrix(c, 2, 2);
  tandem::matmul(tandem::matrix(x, 2, 3), tandem::matrix(w, 3, 2), cm);
  const std::vector<float> h_c = c.to_vector<float>();

  std::printf("backend %s: sum(x + w) = %g, C = [%g %g; %g %g]\n", be.name().c_str(), total, h_c[0], h_c[1],
              h_c[2], h_c[3]);
  return 0;
} catch (const tandem::Error& e) {  // every tandem error says what to do: an unavailable backend why
  std::fprintf(stderr, "quickstart: %s\n", e.what());
  return 1;
}
