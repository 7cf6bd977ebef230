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

  // y = x + w, elementwise (a new buffer on be); then the sum of y.
  const tandem::Buffer y = tandem::add(x, w);
  const double total = tandem::sum(y);

  // C (2, 2) = A (2, 3) * B (3, 2): x and w viewed as row-major matrices. Every op also has a
  // form that writes into a buffer you give: tandem::add(x, w, y), tandem::matmul(a, b, c).
  const tandem::Matrix c = tandem::matmul(tandem::matrix(x, 2, 3), tandem::matrix(w, 3, 2));
  const std::vector<float> h_c = c.buffer.to_vector<float>();

  std::printf("backend %s: sum(x + w) = %g, C = [%g %g; %g %g]\n", be.name().c_str(), total, h_c[0], h_c[1],
              h_c[2], h_c[3]);
  return 0;
} catch (const tandem::Error& e) {  // every tandem error says what to do: an unavailable backend why
  std::fprintf(stderr, "quickstart: %s\n", e.what());
  return 1;
}
