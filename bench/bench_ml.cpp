// ML benchmarks: MLP training throughput (samples/s) for a 784-W-W-10 network at widths 64 to
// 1024 and batches 256 to 16384, and the closed-form linear regression on 10^6 x 100 data, per
// backend. Peers measured in the same run: for the MLP, the step's own matmuls timed alone, once
// on the tier the model uses (automatic: the share of the step that is matmul, the rest being
// activations, softmax, optimizer and gathers) and once on the vendor library where the backend
// has one (OpenBLAS, later cuBLAS: the step against a vendor-GEMM-bound step); for the regression,
// one Gram matrix X^T X, the least any QR of X must do. Each MLP step is also timed with its
// forward and backward replayed as a graph (TrainOptions::graphs; on cuda one CUDA graph launch
// instead of one launch per op), against the same step op by op.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "tandem/mlp.hpp"
#include "tandem/regression.hpp"
#include "tandem/tandem.hpp"

namespace {

using namespace tandem;
struct MlpRow {
  std::string backend;
  std::size_t width = 0, batch = 0;
  double step_seconds = 0, samples_per_second = 0, gemm_seconds = 0, vendor_gemm_seconds = 0;  // 0: no vendor tier
  double graph_step_seconds = 0;  // the same step, forward and backward replayed as a graph
};

struct RegressionRow {
  std::string backend;
  std::size_t rows = 0, cols = 0;
  double fit_seconds = 0, gram_seconds = 0;
};

constexpr std::size_t kInputs = 784, kClasses = 10;

// The matmuls of one training step of 784-W-W-10 at batch B, on the backend, alone.
double gemm_floor(Backend& be, std::size_t w, std::size_t b, MatmulTier tier) {
  const std::size_t widths[] = {kInputs, w, w, kClasses};
  std::vector<Buffer> keep;
  std::vector<std::function<void()>> calls;
  auto m = [&](std::size_t r, std::size_t c) {
    keep.emplace_back(be, DType::f32, r * c);
    keep.back().fill(0.01);
    return matrix(keep.back(), static_cast<std::int64_t>(r), static_cast<std::int64_t>(c));
  };
  for (int l = 0; l < 3; ++l) {
    const std::size_t in = widths[l], out = widths[l + 1];
    Matrix x = m(b, in), wt = m(in, out), y = m(b, out), dw = m(in, out), dx = m(b, in);
    MatmulOptions fwd, dwo, dxo;
    fwd.tier = dwo.tier = dxo.tier = tier;
    dwo.trans_a = Transpose::yes;
    dxo.trans_b = Transpose::yes;
    calls.push_back([=]() mutable { matmul(x, wt, y, fwd); });
    calls.push_back([=]() mutable { matmul(x, y, dw, dwo); });
    if (l > 0) calls.push_back([=]() mutable { matmul(y, wt, dx, dxo); });
  }
  return bench::median_seconds(3, [&] {
    for (auto& c : calls) c();
    be.synchronize(Queue{});
  });
}

MlpRow bench_mlp(Backend& be, std::size_t w, std::size_t b) {
  data::Rng rng(1);
  data::Dataset d;
  d.rows = 2 * b;
  d.cols = kInputs;
  d.source = "synthetic";
  d.features.resize(d.rows * d.cols);
  for (double& v : d.features) v = rng.normal();
  for (std::size_t r = 0; r < d.rows; ++r) d.targets.push_back(double(rng.below(kClasses)));
  ml::Mlp model(be, ml::layers_from_widths({kInputs, w, w, kClasses}));
  ml::TrainOptions t;
  t.batch_size = b;
  t.epochs = 1;
  t.placement = ml::DataPlacement::device;
  (void)ml::train(model, d, nullptr, t);  // warm-up: allocations, caches, thread pools
  t.epochs = 2;
  const auto reports = ml::train(model, d, nullptr, t);
  double seconds = 0;
  for (const auto& r : reports) seconds += r.seconds;
  MlpRow row;
  row.backend = be.name();
  row.width = w;
  row.batch = b;
  row.step_seconds = seconds / double(2 * 2);  // 2 epochs of 2 steps
  t.graphs = true;
  t.epochs = 1;
  (void)ml::train(model, d, nullptr, t);  // records the pass
  t.epochs = 2;
  double graph_seconds = 0;
  for (const auto& r : ml::train(model, d, nullptr, t)) graph_seconds += r.seconds;
  row.graph_step_seconds = graph_seconds / double(2 * 2);
  row.samples_per_second = double(b) / row.step_seconds;
  const auto tiers = be.matmul_tiers(DType::f32);
  const bool vendor = std::find(tiers.begin(), tiers.end(), MatmulTier::vendor) != tiers.end();
  row.gemm_seconds = gemm_floor(be, w, b, MatmulTier::automatic);
  if (vendor) row.vendor_gemm_seconds = gemm_floor(be, w, b, MatmulTier::vendor);
  return row;
}

RegressionRow bench_regression(Backend& be, std::size_t n, std::size_t p) {
  data::Rng rng(2);
  data::Dataset d;
  d.rows = n;
  d.cols = p;
  d.source = "synthetic";
  d.features.resize(n * p);
  for (double& v : d.features) v = rng.normal();
  d.targets.resize(n);
  for (std::size_t r = 0; r < n; ++r) {
    double y = 1;
    for (std::size_t c = 0; c < p; ++c) y += d.features[r * p + c] * double(c % 7);
    d.targets[r] = y + 0.1 * rng.normal();
  }
  RegressionRow row;
  row.backend = be.name();
  row.rows = n;
  row.cols = p;
  row.fit_seconds = bench::median_seconds(2, [&] { (void)ml::fit_linear_regression(be, d); });
  Buffer x = Buffer::from(be, d.features), g(be, DType::f64, p * p);
  Matrix xm = matrix(x, static_cast<std::int64_t>(n), static_cast<std::int64_t>(p));
  Matrix gm = matrix(g, static_cast<std::int64_t>(p), static_cast<std::int64_t>(p));
  MatmulOptions o;
  o.trans_a = Transpose::yes;
  row.gram_seconds = bench::median_seconds(3, [&] {
    matmul(xm, xm, gm, o);
    be.synchronize(Queue{});
  });
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage =
      "usage: tandem_bench_ml [--quick] [--json FILE] [--backend NAME]...\n"
      "  MLP training throughput (784-W-W-10, W 64..1024, batch 256..16384) and the closed-form\n"
      "  linear regression on 10^6 x 100, per backend (default: every available CPU and GPU backend;\n"
      "  name sim to include the simulator). --quick: fewer and smaller runs.\n";
  bench::Options options;
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      options.json_path = argv[++i];
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      options.quick = true;
    } else if (std::strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
      names.push_back(argv[++i]);
    } else {
      std::fputs(usage, stderr);
      return std::strcmp(argv[i], "--help") == 0 ? 0 : 2;
    }
  }
  try {
    if (names.empty()) {
      for (const auto& info : backends()) {
        if (!info.available || info.name == "reference") continue;
        if (get_backend(info.name).properties().kind == BackendKind::simulator) continue;
        names.push_back(info.name);
      }
    }
    const std::vector<std::size_t> widths =
        options.quick ? std::vector<std::size_t>{64, 256} : std::vector<std::size_t>{64, 128, 256, 1024};
    const std::vector<std::size_t> batches =
        options.quick ? std::vector<std::size_t>{256, 1024} : std::vector<std::size_t>{256, 1024, 4096, 16384};
    const std::size_t reg_rows = options.quick ? 100000 : 1000000;

    std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%d", std::localtime(&now));
    std::vector<MlpRow> mlp;
    std::vector<RegressionRow> reg;
    std::string machine;
    for (const std::string& name : names) {
      Backend& be = get_backend(name);
      if (machine.empty()) machine = be.properties().name;
      const bool sim = be.properties().kind == BackendKind::simulator;
      std::printf("MLP training, 784-W-W-10, f32, Adam, data on the device: %s (%s), %s\n", name.c_str(),
                  be.properties().name.c_str(), date);
      std::printf("%-10s %6s %7s %10s %12s %10s %7s %11s %12s %10s %8s\n", "backend", "width", "batch", "ms/step",
                  "samples/s", "GEMM ms", "share", "vendor ms", "vendor/step", "graph ms", "speedup");
      for (std::size_t w : widths) {
        for (std::size_t b : batches) {
          if (sim && (w > 64 || b > 256)) continue;  // the simulator is a correctness tool
          const MlpRow r = bench_mlp(be, w, b);
          mlp.push_back(r);
          std::printf("%-10s %6zu %7zu %10.3f %12.0f %10.3f %6.0f%%", r.backend.c_str(), w, b, 1e3 * r.step_seconds,
                      r.samples_per_second, 1e3 * r.gemm_seconds, 100 * r.gemm_seconds / r.step_seconds);
          if (r.vendor_gemm_seconds > 0) {
            std::printf(" %11.3f %11.0f%%", 1e3 * r.vendor_gemm_seconds, 100 * r.vendor_gemm_seconds / r.step_seconds);
          } else {
            std::printf(" %11s %12s", "-", "-");
          }
          std::printf(" %10.3f %7.2fx\n", 1e3 * r.graph_step_seconds, r.step_seconds / r.graph_step_seconds);
          std::fflush(stdout);
        }
      }
      if (!sim) {
        const RegressionRow r = bench_regression(be, reg_rows, 100);
        reg.push_back(r);
        std::printf(
            "linear regression, closed form (CholeskyQR2 + refinement), %zu x %zu f64: %.3f s fit "
            "(upload included); one X^T X %.3f s, %.1f x of it\n\n",
            r.rows, r.cols, r.fit_seconds, r.gram_seconds, r.fit_seconds / r.gram_seconds);
      }
    }
    if (!options.json_path.empty()) {
      std::FILE* f = std::fopen(options.json_path.c_str(), "w");
      if (f == nullptr) {
        std::fprintf(stderr, "tandem_bench_ml: cannot write %s\n", options.json_path.c_str());
        return 2;
      }
      std::fprintf(f, "{\n  \"benchmark\": \"tandem_bench_ml\",\n  \"date\": \"%s\",\n  \"machine\": \"%s\",\n", date,
                   machine.c_str());
      std::fprintf(f, "  \"mlp\": [\n");
      for (std::size_t i = 0; i < mlp.size(); ++i) {
        const MlpRow& r = mlp[i];
        std::fprintf(
            f,
            "    {\"backend\": \"%s\", \"layers\": [784, %zu, %zu, 10], \"batch\": %zu, \"step_seconds\": %.6g, "
            "\"samples_per_second\": %.6g, \"graph_step_seconds\": %.6g, \"gemm_seconds_auto_tier\": %.6g, "
            "\"gemm_seconds_vendor\": %s}%s\n",
            r.backend.c_str(), r.width, r.width, r.batch, r.step_seconds, r.samples_per_second, r.graph_step_seconds,
            r.gemm_seconds, r.vendor_gemm_seconds > 0 ? std::to_string(r.vendor_gemm_seconds).c_str() : "null",
            i + 1 < mlp.size() ? "," : "");
      }
      std::fprintf(f, "  ],\n  \"regression\": [\n");
      for (std::size_t i = 0; i < reg.size(); ++i) {
        const RegressionRow& r = reg[i];
        std::fprintf(f,
                     "    {\"backend\": \"%s\", \"rows\": %zu, \"cols\": %zu, \"fit_seconds\": %.6g, "
                     "\"gram_seconds\": %.6g}%s\n",
                     r.backend.c_str(), r.rows, r.cols, r.fit_seconds, r.gram_seconds, i + 1 < reg.size() ? "," : "");
      }
      std::fprintf(f, "  ]\n}\n");
      std::fclose(f);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "tandem_bench_ml: %s\n", e.what());
    return 2;
  }
  return 0;
}
