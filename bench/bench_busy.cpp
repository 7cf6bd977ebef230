// The openmp backend's ops and an MLP epoch, timed: the median milliseconds of each, as one JSON
// object on standard output. bench/busy_machine.py runs it quiet and beside one busy process per
// core, with the backend's own thread choice and with OMP_NUM_THREADS fixing the team, and
// judges the ratios. --pause MS sleeps that long before each timed call (the team's threads
// asleep by then), as a program that computes now and then does.
//
// usage: tandem_bench_busy [--reps R] [--pause MS]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "tandem/mlp.hpp"
#include "tandem/tandem.hpp"

int main(int argc, char** argv) {
  using namespace tandem;
  int reps = 9, pause_ms = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--pause" && i + 1 < argc) {
      char* end = nullptr;
      const long ms = std::strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || ms < 0 || ms > 60000) {
        std::fprintf(stderr, "tandem_bench_busy: --pause takes milliseconds from 0 to 60000, not '%s'\n", argv[i]);
        return 2;
      }
      pause_ms = static_cast<int>(ms);
    } else {
      std::fprintf(stderr, "usage: tandem_bench_busy [--reps R] [--pause MS]\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  try {
    Backend& be = get_backend("openmp");
    const std::size_t n = std::size_t(1) << 20;
    std::vector<float> h(n);
    for (std::size_t i = 0; i < n; ++i) h[i] = float(i % 1000) * 1e-3f;
    Buffer x = Buffer::from(be, h), y = Buffer::from(be, h), o(be, DType::f32, n), r(be, DType::f32, 1);
    const std::int64_t m = 256;
    Buffer a(be, DType::f32, std::size_t(m * m)), b(be, DType::f32, std::size_t(m * m)),
        c(be, DType::f32, std::size_t(m * m));
    a.fill(0.5);
    b.fill(0.25);
    // An MLP epoch: 4096 samples of 64 features, 10 classes, batches of 32 (the digits' shape).
    data::Dataset d;
    d.rows = 4096;
    d.cols = 64;
    d.features.resize(d.rows * d.cols);
    d.targets.resize(d.rows);
    for (std::size_t i = 0; i < d.features.size(); ++i) d.features[i] = double((i * 37) % 17) / 17.0;
    for (std::size_t i = 0; i < d.rows; ++i) d.targets[i] = double(i % 10);
    // Each epoch starts from the same new model. Trained on, the Adam moments of weights whose
    // gradients have stopped decay into subnormal floats within a few epochs, and arithmetic on
    // them is slow (on a Xeon epochs went from 8 ms to 18-20 ms; 6-8 ms throughout with
    // subnormals flushed to zero): the reps would time different work.
    std::optional<ml::Mlp> model;
    const auto fresh_model = [&] { model.emplace(be, ml::layers_from_widths({64, 128, 10})); };
    ml::TrainOptions train;
    train.epochs = 1;
    train.batch_size = 32;
    struct Op {
      const char* name;
      std::function<void()> run;
      std::function<void()> setup;  // before each run, untimed
    };
    const std::vector<Op> ops = {
        {"add 1M f32", [&] { add(x, y, o); }, {}},
        {"sum 1M f32", [&] { reduce(ReduceOp::sum, x, r); }, {}},
        {"scan 1M f32", [&] { inclusive_scan(x, o); }, {}},
        {"matmul 256^3 f32",
         [&] {
           Matrix mc = matrix(c, m, m);
           matmul(matrix(a, m, m), matrix(b, m, m), mc);
         },
         {}},
        {"mlp epoch (4096 x 64, batch 32)", [&] { (void)ml::train(*model, d, nullptr, train); }, fresh_model},
    };
    std::printf("{\"ops\": [");
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const auto timed = [&] {
        ops[i].run();
        be.synchronize({});
      };
      double s = 0;
      if (ops[i].setup || pause_ms > 0) {  // each run after its setup and pause, untimed; one run first, to warm up
        const auto sample = [&] {
          if (ops[i].setup) ops[i].setup();
          be.synchronize({});
          std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
          return detail::host_ms(timed);
        };
        (void)sample();
        s = 1e-3 * detail::repeat_median(sample, reps, reps, 0).median_ms;
      } else {
        s = bench::median_seconds(reps, timed);
      }
      std::printf("%s{\"name\": \"%s\", \"ms\": %.4f}", i ? ", " : "", ops[i].name, s * 1e3);
    }
    std::printf("]}\n");
  } catch (const tandem::Error& e) {
    std::fprintf(stderr, "tandem_bench_busy: %s\n", e.what());
    return 1;
  }
  return 0;
}
