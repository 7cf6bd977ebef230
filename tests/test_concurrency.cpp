// Concurrent callers: host threads share one backend, some on the default queue and some on
// queues of their own, each running mixed work (matmul in every tier, reductions, a scan, MLP
// steps) whose results must equal those of the same work run alone. Registered per backend with
// the matrix; run under ThreadSanitizer by ci/test.sh (the tsan preset).
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "ml_support.hpp"
#include "tandem/mlp.hpp"
#include "tandem/tandem.hpp"

namespace {

using namespace tandem;

std::vector<float> random_floats(data::Rng& rng, std::size_t n) {
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(2 * rng.uniform() - 1);
  return v;
}

void append(std::vector<double>& out, const std::vector<float>& v) { out.insert(out.end(), v.begin(), v.end()); }

// One unit of work, determined by seed; every result it computes, in order.
std::vector<double> mixed_work(Backend& be, Queue q, std::uint64_t seed) {
  data::Rng rng(seed);
  std::vector<double> out;
  // Large enough that every tier takes its tiled path (kokkos: m*n >= 64*64, k >= 16).
  const std::int64_t m = 96, n = 80, k = 40;
  const Buffer a = Buffer::from(be, random_floats(rng, m * k)), b = Buffer::from(be, random_floats(rng, k * n));
  for (MatmulTier tier : be.matmul_tiers(DType::f32)) {
    Buffer c(be, DType::f32, static_cast<std::size_t>(m * n));
    Matrix cm = matrix(c, m, n);
    matmul(matrix(a, m, k), matrix(b, k, n), cm, {.tier = tier}, q);
    be.synchronize(q);
    append(out, c.to_vector<float>());
  }
  const Buffer x = Buffer::from(be, random_floats(rng, 10007));
  Buffer total(be, DType::f32, 1), largest(be, DType::f32, 1), where(be, DType::i32, 1), prefix(be, DType::f32, 10007);
  reduce(ReduceOp::sum, x, total, q);
  reduce(ReduceOp::max, x, largest, q);
  reduce(ReduceOp::argmax, x, where, q);
  inclusive_scan(x, prefix, q);
  be.synchronize(q);
  append(out, total.to_vector<float>());
  append(out, largest.to_vector<float>());
  out.push_back(where.to_vector<std::int32_t>()[0]);
  append(out, prefix.to_vector<float>());
  // Two training steps of a small MLP (its ops run on the default queue).
  ml::MlpOptions options;
  options.seed = seed;
  ml::Mlp model(be, ml::layers_from_widths({16, 24, 4}), options);
  const std::int64_t batch = 32;
  std::vector<std::int32_t> labels(batch);
  std::vector<float> onehot(batch * 4, 0.0f);
  for (std::int64_t i = 0; i < batch; ++i) {
    labels[i] = static_cast<std::int32_t>(rng.below(4));
    onehot[i * 4 + labels[i]] = 1.0f;
  }
  const Matrix xb = matrix(Buffer::from(be, random_floats(rng, batch * 16)), batch, 16);
  const Buffer lb = Buffer::from(be, labels);
  const Matrix tb = matrix(Buffer::from(be, onehot), batch, 4);
  for (int step = 0; step < 2; ++step) out.push_back(model.train_step(xb, lb, tb));
  for (const Buffer& p : model.parameters()) append(out, p.to_vector<float>());
  return out;
}

// Equal bit for bit on CPU backends; on a GPU, atomics may order a sum differently.
std::size_t differences(const std::vector<double>& got, const std::vector<double>& want, bool exact) {
  if (got.size() != want.size()) return std::max(got.size(), want.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool same = exact ? got[i] == want[i] : std::fabs(got[i] - want[i]) <= 1e-4 * (1 + std::fabs(want[i]));
    bad += !same;
  }
  return bad;
}

}  // namespace

TEST_CASE("concurrency: threads sharing the backend, on the default queue and on their own, get the serial results") {
  Backend* be = test::backend_or_skip();
  if (be == nullptr) return;
  const bool slow = be->properties().kind == BackendKind::simulator;
  const int threads = slow ? 4 : 8, reps = slow ? 2 : 6, kinds = 4;
  const bool exact = be->properties().kind != BackendKind::gpu;
  std::vector<std::vector<double>> serial;
  for (int w = 0; w < kinds; ++w) serial.push_back(mixed_work(*be, Queue{}, test::seed() + std::uint64_t(w)));

  std::atomic<int> wrong_runs = 0, runs = 0;
  std::atomic<std::size_t> wrong_elements = 0;
  std::vector<std::string> errors(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        const Queue q = t % 2 == 0 ? Queue{} : be->create_queue();  // queues made concurrently too
        for (int r = 0; r < reps; ++r) {
          const int w = (t + r) % kinds;
          const std::size_t bad = differences(mixed_work(*be, q, test::seed() + std::uint64_t(w)), serial[w], exact);
          wrong_runs += bad > 0;
          wrong_elements += bad;
          ++runs;
        }
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(t)] = e.what();
      }
    });
  }
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t) CHECK_MESSAGE(errors[t].empty(), "thread ", t, ": ", errors[t]);
  std::printf("%s: %d concurrent runs of mixed work on %d threads, %d wrong (%zu elements)\n", be->name().c_str(),
              runs.load(), threads, wrong_runs.load(), wrong_elements.load());
  CHECK(runs == threads * reps);
  CHECK(wrong_runs == 0);
}

TEST_CASE("concurrency: a capture inside captured work is refused") {
  Backend* be = test::backend_or_skip();
  if (be == nullptr) return;
  const Queue q = be->create_queue();
  Buffer x(*be, DType::f32, 16);
  bool refused = false;
  try {
    Graph outer = be->capture(q, [&] {
      fill(x, 1.0, q);
      (void)be->capture(q, [&] { fill(x, 2.0, q); });
    });
    outer.replay();  // where the work is recorded rather than captured, the nesting shows here
  } catch (const InvalidArgument& e) {
    refused = std::string(e.what()).find("nest") != std::string::npos;
  }
  be->synchronize(q);
  CHECK(refused);
}

TEST_CASE("concurrency: work that replays its own graph is refused instead of recursing") {
  Backend* be = test::backend_or_skip();
  if (be == nullptr) return;
  const Queue q = be->create_queue();
  Buffer x(*be, DType::f32, 16);
  // Where a replay runs the recorded work (the host backends), the inner replay is refused; where
  // the work ran once while a device graph was captured (self still empty), a replay runs no host
  // code. Without the guard the host backends recursed until the stack ran out.
  Graph self;
  int runs = 0;
  std::string refused;
  try {
    self = be->capture(q, [&] {
      ++runs;
      fill(x, 1.0, q);
      if (!self.empty()) self.replay();
    });
    self.replay();
  } catch (const InvalidArgument& e) {
    refused = e.what();
  }
  be->synchronize(q);
  CHECK(runs == 1);
  if (!refused.empty()) CHECK(refused.find("inside its own replay") != std::string::npos);
}
