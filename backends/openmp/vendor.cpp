// vendor tier: OpenBLAS through CBLAS, for f32 and f64 (row-major, transposes passed through).
#include <dlfcn.h>

#include <cctype>
#include <string>

#include "openmp_backend.hpp"

#ifdef TANDEM_HAVE_BLAS
#include <cblas.h>
#endif

namespace tandem::openmp {

bool vendor_available() {
#ifdef TANDEM_HAVE_BLAS
  return true;
#else
  return false;
#endif
}

#ifdef TANDEM_HAVE_BLAS
namespace {

// The vector ISA an OpenBLAS core name's kernels use: 3 AVX-512, 2 AVX2, 1 AVX, 0 older (SSE).
int core_level(std::string core) {
  for (char& ch : core) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (const char* name : {"skylakex", "cooperlake", "sapphirerapids"}) {
    if (core == name) return 3;
  }
  for (const char* name : {"haswell", "zen"}) {
    if (core == name) return 2;
  }
  for (const char* name : {"sandybridge", "bulldozer", "piledriver", "steamroller", "excavator"}) {
    if (core == name) return 1;
  }
  return 0;
}

int cpu_level() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return 3;
  if (__builtin_cpu_supports("avx2")) return 2;
  if (__builtin_cpu_supports("avx")) return 1;
#endif
  return 0;
}

// How the linked OpenBLAS runs its threads, from openblas_get_parallel() where it has one: 0
// sequential, 1 OpenBLAS's own pthreads pool, 2 OpenMP.
std::string threading_note(int (*parallel)()) {
  if (parallel == nullptr) return "";
  switch (parallel()) {
    case 0: return "; sequential build (the vendor tier runs on the calling thread)";
    case 2: return "; OpenMP build (one thread pool with tandem's team)";
    case 1:
      return "; pthreads build: its worker threads spin beside tandem's OpenMP team after loading and after "
             "each call, taking cores from every op for up to half a second. Link the OpenMP build "
             "(Debian: libopenblas-openmp-dev) or set OPENBLAS_NUM_THREADS=1";
    default: return "";
  }
}

}  // namespace
#endif

std::string vendor_description() {
#ifdef TANDEM_HAVE_BLAS
  // OpenBLAS says which kernels it chose for this CPU; looked up at run time, so that another
  // CBLAS library still links.
  using Text = char* (*)();
  using Count = int (*)();
  const auto corename = reinterpret_cast<Text>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const auto config = reinterpret_cast<Text>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  if (corename == nullptr) return "a CBLAS library that does not say which kernels it runs (not OpenBLAS)";
  const std::string core = corename();
  std::string version = "OpenBLAS";
  if (config != nullptr) {  // "OpenBLAS 0.3.21 NO_AFFINITY Prescott MAX_THREADS=64"
    const std::string c = config();
    if (c.rfind("OpenBLAS ", 0) == 0) version = c.substr(0, c.find(' ', 9));
  }
  static const char* const isa[] = {"SSE", "AVX", "AVX2", "AVX-512"};
  std::string text = version + ", " + core + " kernels (" + isa[core_level(core)] + ")";
  if (core_level(core) < cpu_level()) {
    text += ": older than this CPU's " + std::string(isa[cpu_level()]) +
            ", so the vendor tier understates the CPU (a newer OpenBLAS knows it; with a DYNAMIC_ARCH build, "
            "OPENBLAS_CORETYPE names a newer core)";
  }
  return text + threading_note(reinterpret_cast<Count>(dlsym(RTLD_DEFAULT, "openblas_get_parallel")));
#else
  return "none: this build has no BLAS (install libopenblas-openmp-dev and rebuild)";
#endif
}

void matmul_vendor(const GemmArgs& g) {
#ifdef TANDEM_HAVE_BLAS
  const auto ta = g.trans_a == Transpose::no ? CblasNoTrans : CblasTrans;
  const auto tb = g.trans_b == Transpose::no ? CblasNoTrans : CblasTrans;
  if (g.ab_type == DType::f32) {
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<blasint>(g.m), static_cast<blasint>(g.n), static_cast<blasint>(g.k),
                static_cast<float>(g.alpha), static_cast<const float*>(g.a), static_cast<blasint>(g.lda),
                static_cast<const float*>(g.b), static_cast<blasint>(g.ldb), static_cast<float>(g.beta),
                static_cast<float*>(g.c), static_cast<blasint>(g.ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, static_cast<blasint>(g.m), static_cast<blasint>(g.n), static_cast<blasint>(g.k),
                g.alpha, static_cast<const double*>(g.a), static_cast<blasint>(g.lda), static_cast<const double*>(g.b),
                static_cast<blasint>(g.ldb), g.beta, static_cast<double*>(g.c), static_cast<blasint>(g.ldc));
  }
#else
  (void)g;
  throw Unsupported("openmp: the vendor tier needs OpenBLAS; rebuild with libopenblas-openmp-dev installed");
#endif
}

}  // namespace tandem::openmp
