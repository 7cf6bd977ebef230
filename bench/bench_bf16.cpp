// bf16 matmul on the openmp backend: every bf16 tier this CPU offers (register_blocked widens to
// f32 as it packs; tensor_core runs AMX tiles where the CPU has them) at 1024^3, 2048^3 and
// 4096^3, timed alternately (the median of the rounds; each timed call follows an untimed one of
// the same tier, as a peer's calls follow each other), with the tiers' results compared before a
// speed is printed: a fast wrong answer is not a result. bench/pytorch_bf16_matmul.py runs this
// beside PyTorch's bf16 matmul in alternating rounds for the peer's ratio. After the tiers, the
// roofs they run under, measured on the same team (fma_peak.hpp): the f32 FMA roof at the
// micro-kernel's width (register_blocked's), where the CPU has AVX512-BF16 the vdpbf16ps roof
// (the tensor_core tier's AVX512-BF16 engine) and where it has AMX-BF16 the tile roof (its AMX
// engine), with the engine the tensor_core tier runs on this CPU.
//
// usage: tandem_bench_bf16 [--sizes N,N,...] [--reps R] [--json]
//   --json: one JSON object on standard output instead of the table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "fma_peak.hpp"
#include "tandem/tandem.hpp"

namespace {

using namespace tandem;

struct Row {
  std::int64_t n;
  std::string tier;
  double gflops;
};

// What `tandem info` says of the tensor_core tier on this CPU (its engine, or why there is none).
std::string tensor_engine(const Backend& be) {
  for (const auto& t : be.properties().tuning) {
    if (t.first == "tensor_core tier") return t.second;
  }
  return "not reported";
}

std::string microkernel_isa(const DeviceProperties& p) {
  for (const std::string& f : p.isa_features) {
    if (f.rfind("microkernel:", 0) == 0) return f.substr(12);
  }
  return "generic";
}

std::vector<std::int64_t> parse_sizes(const std::string& text) {
  std::vector<std::int64_t> sizes;
  std::size_t from = 0;
  while (from < text.size()) {
    const std::size_t comma = std::min(text.find(',', from), text.size());
    const long long n = std::atoll(text.substr(from, comma - from).c_str());
    if (n < 1 || n > 16384) {
      std::fprintf(stderr, "tandem_bench_bf16: sizes are whole numbers from 1 to 16384, not '%s'\n", text.c_str());
      std::exit(2);
    }
    sizes.push_back(n);
    from = comma + 1;
  }
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::int64_t> sizes = {1024, 2048, 4096};
  int reps = 5;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sizes" && i + 1 < argc) {
      sizes = parse_sizes(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--json") {
      json = true;
    } else {
      std::fprintf(stderr, "usage: tandem_bench_bf16 [--sizes N,N,...] [--reps R] [--json]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  try {
    Backend& be = get_backend("openmp");
    std::vector<MatmulTier> tiers;
    for (MatmulTier t : be.matmul_tiers(DType::bf16)) {
      if (t == MatmulTier::register_blocked || t == MatmulTier::tensor_core) tiers.push_back(t);
    }
    std::vector<Row> rows;
    for (const std::int64_t n : sizes) {
      const std::size_t count = static_cast<std::size_t>(n * n);
      std::vector<bfloat16> h(count);
      for (std::size_t i = 0; i < count; ++i) h[i] = bfloat16(float((i * 7919) % 61) / 61.0f - 0.5f);
      Buffer a(be, DType::bf16, count), b(be, DType::bf16, count);
      a.upload_bytes(h.data(), count * sizeof(bfloat16));
      b.upload_bytes(h.data(), count * sizeof(bfloat16));
      std::vector<Buffer> out;
      std::vector<std::vector<double>> seconds(tiers.size());
      for (std::size_t t = 0; t < tiers.size(); ++t) out.emplace_back(be, DType::f32, count);
      const auto run = [&](std::size_t t) {
        MatmulOptions o;
        o.tier = tiers[t];
        Matrix c = matrix(out[t], n, n);
        matmul(matrix(a, n, n), matrix(b, n, n), c, o);
        be.synchronize({});
      };
      // Each timed call right after an untimed one of the same tier (the first of them also the
      // warm-up: packing memory, threads), as a peer timed call after call (PyTorch in
      // pytorch_bf16_matmul.py) runs: timed right after the other tier, the tensor_core tier took
      // 9.4-10 ms at 2048^3 on the 480 MiB-L3 AMX Xeon VM, against 7.6-8.1 ms call after call (the
      // cause not measured). The tiers still take turns, so drift hits each.
      for (int r = 0; r < reps; ++r) {
        for (std::size_t k = 0; k < tiers.size(); ++k) {
          const std::size_t t = (k + static_cast<std::size_t>(r)) % tiers.size();  // rotating, as the tunings time
          run(t);
          seconds[t].push_back(1e-3 * detail::host_ms([&] { run(t); }));
        }
      }
      // Each tier's C against the first's: f32 sums of the same bf16 products, in another order.
      const std::vector<float> first = out[0].to_vector<float>();
      for (std::size_t t = 1; t < tiers.size(); ++t) {
        const std::vector<float> other = out[t].to_vector<float>();
        for (std::size_t i = 0; i < count; ++i) {
          if (std::fabs(other[i] - first[i]) > 1e-3f * float(n)) {
            std::fprintf(stderr, "tandem_bench_bf16: %s and %s differ at %lld^3, element %zu: %g against %g\n",
                         std::string(name_of(tiers[t])).c_str(), std::string(name_of(tiers[0])).c_str(),
                         static_cast<long long>(n), i, double(other[i]), double(first[i]));
            return 1;
          }
        }
      }
      for (std::size_t t = 0; t < tiers.size(); ++t) {
        std::sort(seconds[t].begin(), seconds[t].end());
        const double median = seconds[t][seconds[t].size() / 2];
        rows.push_back({n, std::string(name_of(tiers[t])), 2.0 * double(n) * double(n) * double(n) / median / 1e9});
      }
    }
    const std::string isa = microkernel_isa(be.properties());
    const double fma_roof = bench::fma_roof_gflops(isa);
    const bool have_dot = bench::cpu_has_avx512bf16();
    const double dot_roof = have_dot ? bench::bf16_dot_roof_gflops() : 0.0;
    const bool have_amx = bench::amx_tiles_granted();
    const double amx_roof = have_amx ? bench::amx_roof_gflops() : 0.0;
    const std::string engine = tensor_engine(be);
    if (json) {
      std::printf("{\"rows\": [");
      for (std::size_t i = 0; i < rows.size(); ++i) {
        std::printf("%s{\"n\": %lld, \"tier\": \"%s\", \"gflops\": %.2f}", i ? ", " : "",
                    static_cast<long long>(rows[i].n), rows[i].tier.c_str(), rows[i].gflops);
      }
      std::printf("], \"tensor_core_engine\": \"%s\", \"roofs\": {\"fma_f32_%s\": %.2f", engine.c_str(),
                  isa.c_str(), fma_roof);
      if (have_dot) std::printf(", \"vdpbf16ps\": %.2f", dot_roof);
      if (have_amx) std::printf(", \"amx_tdpbf16ps\": %.2f", amx_roof);
      std::printf("}}\n");
    } else {
      std::printf("bf16 matmul on openmp (%s), median of %d alternating rounds; tensor_core tier: %s\n",
                  be.properties().name.c_str(), reps, engine.c_str());
      for (const Row& r : rows) {
        std::printf("  %5lld^3  %-17s %8.1f GFLOP/s\n", static_cast<long long>(r.n), r.tier.c_str(), r.gflops);
      }
      std::printf("roofs on %d thread(s): f32 FMA (%s) %.1f GFLOP/s", omp_get_max_threads(), isa.c_str(), fma_roof);
      if (have_dot) std::printf(", bf16 dot products (vdpbf16ps) %.1f GFLOP/s", dot_roof);
      if (have_amx) std::printf(", AMX tiles (tdpbf16ps) %.1f GFLOP/s", amx_roof);
      std::printf("\n");
    }
  } catch (const tandem::Error& e) {
    std::fprintf(stderr, "tandem_bench_bf16: %s\n", e.what());
    return 1;
  }
  return 0;
}
