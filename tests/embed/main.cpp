// The host's own `quickstart`.
#include <cstdio>
#include <vector>

double host_sum(const std::vector<float>& v);

int main() {
  std::printf("host sum = %g\n", host_sum({1.5f, 2.5f, 3.0f}));
  return 0;
}
