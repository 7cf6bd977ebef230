// tandem::dist under mpirun (tests/CMakeLists.txt runs it with 2 and 3 ranks):
//   dist_program collectives   allreduce and broadcast on every rank, checked against what each
//                              rank can compute alone; prints "collectives: all passed on N ranks"
//   dist_program throw         rank 1 throws before a barrier the others wait in: the job must end
//                              with that message (the program aborts the job, as the CLI does)
//   dist_program train         data-parallel MLP training on digits equals single-process
//                              training on the same global batches, and the replicas stay identical
//   dist_program regress       linear regression on the diabetes rows split over the ranks equals
//                              the one-process closed form on all of them
//   dist_program local NAME    one process, without mpirun: allreduce on backend NAME leaves the
//                              data as it is (on cuda: through NCCL); SKIPPED where NAME cannot run
#ifdef TANDEM_TEST_HAVE_MPI
#include <mpi.h>
#endif

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tandem/data.hpp"
#include "tandem/mlp.hpp"
#include "tandem/tandem.hpp"

using namespace tandem;

namespace {

int failures = 0;
void expect(bool ok, const std::string& what, int rank) {
  if (!ok) {
    std::printf("rank %d: FAILED: %s\n", rank, what.c_str());
    ++failures;
  }
}

// Allreduce of each dtype and combine, and broadcast, checked against what each rank computes alone.
void collectives(Backend& be) {
  dist::Communicator& w = dist::Communicator::world();
  const int r = w.rank(), s = w.size();
  // i32 sums are exact and wrap modulo 2^32: values near INT32_MAX on every rank.
  std::vector<std::int32_t> ints(1003);
  for (std::size_t i = 0; i < ints.size(); ++i) ints[i] = 2147483000 + r * 7 + std::int32_t(i % 5);
  Buffer bi = Buffer::from(be, ints);
  w.allreduce(bi, dist::Combine::sum);
  const auto got_i = bi.to_vector<std::int32_t>();
  bool exact = true;
  for (std::size_t i = 0; i < ints.size(); ++i) {
    std::uint32_t want = 0;
    for (int q = 0; q < s; ++q) want += std::uint32_t(2147483000 + q * 7 + std::int32_t(i % 5));
    exact = exact && got_i[i] == std::int32_t(want);
  }
  expect(exact, "i32 sum exact (wrapping)", r);
  // f32 sum and f64 mean within the bound of s - 1 additions.
  std::vector<float> f(5000);
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = float(std::sin(double(i) + r)) * 1e3f;
  Buffer bf = Buffer::from(be, f);
  w.allreduce(bf, dist::Combine::sum);
  const auto got_f = bf.to_vector<float>();
  bool close = true;
  for (std::size_t i = 0; i < f.size(); ++i) {
    double want = 0, magnitude = 0;
    for (int q = 0; q < s; ++q) {
      const double v = float(std::sin(double(i) + q)) * 1e3f;
      want += v;
      magnitude += std::fabs(v);
    }
    close = close && std::fabs(got_f[i] - want) <= 6e-8 * s * magnitude + 1e-30;
  }
  expect(close, "f32 sum within s * u of the exact sum", r);
  Buffer bd = Buffer::from(be, std::vector<double>{double(r), 1.0, -2.5 * r});
  w.allreduce(bd, dist::Combine::mean);
  const auto got_d = bd.to_vector<double>();
  expect(got_d[0] == (s - 1) / 2.0 && got_d[1] == 1.0 && std::fabs(got_d[2] + 2.5 * (s - 1) / 2.0) < 1e-12, "f64 mean",
         r);
  // max propagates NaN from any rank, and otherwise is the largest.
  std::vector<float> m = {float(r), -float(r), r == s - 1 ? NAN : 0.0f};
  Buffer bm = Buffer::from(be, m);
  w.allreduce(bm, dist::Combine::max);
  const auto got_m = bm.to_vector<float>();
  expect(got_m[0] == float(s - 1) && got_m[1] == 0.0f && std::isnan(got_m[2]), "max with NaN", r);
  // Broadcast from the last rank.
  Buffer bb = Buffer::from(be, std::vector<double>{double(r) + 0.25, double(r) * 3});
  w.broadcast(bb, s - 1);
  const auto got_b = bb.to_vector<double>();
  expect(got_b[0] == s - 1 + 0.25 && got_b[1] == (s - 1) * 3.0, "broadcast from the last rank", r);
  bool bad_root = false;
  try {
    w.broadcast(bb, s);
  } catch (const InvalidArgument&) {
    bad_root = true;
  }
  expect(bad_root, "a root outside the job is InvalidArgument", r);
}

// Allreduces of several buffers: bucketed, started and finished later, and the errors every rank
// raises together (mixed backends, sizes that differ between ranks).
void collectives_of_many(Backend& be) {
  dist::Communicator& w = dist::Communicator::world();
  const int r = w.rank(), s = w.size();
  // Several buffers in small buckets give what one allreduce each gives.
  std::vector<Buffer> many;
  for (int k = 0; k < 5; ++k) many.push_back(Buffer::from(be, std::vector<double>(100 + 37 * k, double(r + k))));
  w.allreduce(many, dist::Combine::sum, 1024);
  bool buckets = true;
  for (int k = 0; k < 5; ++k) {
    double want = 0;
    for (int q = 0; q < s; ++q) want += q + k;
    for (double v : many[std::size_t(k)].to_vector<double>()) buckets = buckets && v == want;
  }
  expect(buckets, "bucketed allreduce of five buffers", r);
  std::vector<Buffer> mixed = {many[0], Buffer::from(get_backend("reference"), std::vector<double>(4, 1.0))};
  bool mismatch = false;
  try {
    w.allreduce(mixed, dist::Combine::sum);
  } catch (const DeviceMismatch&) {
    mismatch = true;
  }
  expect(mismatch, "buffers of two backends in one call raise DeviceMismatch", r);
  // Different shapes on different ranks: every rank raises ShapeMismatch, none hangs.
  Buffer odd(be, DType::f32, std::size_t(10 + r));
  odd.fill(1);
  bool raised = false;
  try {
    w.allreduce(odd);
  } catch (const ShapeMismatch& e) {
    raised = std::string(e.what()).find("different buffers") != std::string::npos;
  }
  expect(raised, "a size mismatch raises ShapeMismatch on every rank", r);
  // Started allreduces (the reduction runs while the caller goes on): three of them, i32 and f64,
  // give what one allreduce each gives once finished, and the buffers are left alone before.
  std::vector<Buffer> started = {Buffer::from(be, std::vector<std::int32_t>(1000, r + 1)),
                                 Buffer::from(be, std::vector<double>(300, 0.5 * r)),
                                 Buffer::from(be, std::vector<double>(7, double(r)))};
  w.start_allreduce({started[0]});
  w.start_allreduce({started[1], started[2]});
  const bool untouched = started[0].to_vector<std::int32_t>()[999] == r + 1;
  w.finish_allreduces();
  bool sums = untouched;
  for (std::int32_t v : started[0].to_vector<std::int32_t>()) sums = sums && v == s * (s + 1) / 2;
  for (double v : started[1].to_vector<double>()) sums = sums && v == 0.5 * s * (s - 1) / 2;
  for (double v : started[2].to_vector<double>()) sums = sums && v == s * (s - 1) / 2.0;
  expect(sums, "started allreduces, finished", r);
  // A shape mismatch in a started allreduce raises in finish on every rank, and the next works.
  bool started_raised = false;
  w.start_allreduce({odd});
  try {
    w.finish_allreduces();
  } catch (const ShapeMismatch& e) {
    started_raised = std::string(e.what()).find("different buffers") != std::string::npos;
  }
  expect(started_raised, "a size mismatch in a started allreduce raises ShapeMismatch on every rank", r);
  w.start_allreduce({started[2]});
  // While it is pending, the communicator's other calls are refused (its thread may be in MPI).
  bool refused = false;
  try {
    w.barrier();
  } catch (const InvalidArgument& e) {
    refused = std::string(e.what()).find("finish_allreduces") != std::string::npos;
  }
  expect(refused, "a barrier while an allreduce is pending raises InvalidArgument", r);
  w.finish_allreduces();
  expect(started[2].to_vector<double>()[0] == double(s) * s * (s - 1) / 2.0, "a started allreduce after an error", r);
  // Discarded: the sum runs to its end on every rank, the buffer keeps what it held.
  Buffer kept = Buffer::from(be, std::vector<double>(5, double(r)));
  w.start_allreduce({kept});
  w.discard_allreduces();
  expect(kept.to_vector<double>()[4] == double(r), "a discarded allreduce leaves its buffer", r);
  expect(w.allreduce(1.0, dist::Combine::sum) == double(s), "the communicator works after a discard", r);
  expect(w.allreduce(double(r + 1), dist::Combine::sum) == s * (s + 1) / 2.0, "scalar allreduce", r);
}

// Data-parallel training against one process on the same global batches: a 64-32-10 MLP in f64 on
// 301 digits in batches of 50 (with 3 ranks the shares are 16, 17 and 17 rows; the last batch has
// one row, so every rank but the last has none of it), 3 epochs, Adam. The same parameters within 1e-9 of each one's
// size (only the order of the gradient's additions differs), bitwise the same on every rank.
void data_parallel(Backend& be) {
  dist::Communicator& w = dist::Communicator::world();
  const int r = w.rank();
  data::Dataset all = data::read_csv(std::string(TANDEM_DATA_DIR) + "/digits.csv.gz", {.label_column = -1});
  data::Dataset d;
  d.rows = 301;
  d.cols = all.cols;
  d.features.assign(all.features.begin(), all.features.begin() + std::ptrdiff_t(d.rows * d.cols));
  for (double& v : d.features) v /= 16;
  d.targets.assign(all.targets.begin(), all.targets.begin() + std::ptrdiff_t(d.rows));
  d.source = "digits (301 rows)";
  ml::MlpOptions mo;
  mo.dtype = DType::f64;
  mo.seed = 7;
  mo.optimizer.learning_rate = 1e-2;
  ml::TrainOptions to;
  to.epochs = 3;
  to.batch_size = 50;
  to.seed = 11;
  // Each rank starts from a different initialisation: the broadcast must make them one.
  ml::MlpOptions mine = mo;
  mine.seed = 7 + std::uint64_t(r);
  ml::Mlp single(be, ml::layers_from_widths({64, 32, 10}), mo);
  const auto single_reports = ml::train(single, d, nullptr, to);
  // Gradients summed after backward, and each layer's summed while backward goes on.
  for (const bool overlap : {false, true}) {
    const std::string how = overlap ? " (overlapped with backward)" : "";
    ml::Mlp parallel(be, ml::layers_from_widths({64, 32, 10}), mine);
    const std::size_t started_before = w.started();
    const auto reports = dist::train(w, parallel, d, nullptr, to, {}, {.overlap = overlap});
    // 301 rows in batches of 50: 7 batches an epoch, 3 epochs, 2 linear layers.
    expect(w.started() - started_before == (overlap ? std::size_t(7 * 3 * 2) : 0),
           "one allreduce started per layer and batch" + how + ", " + std::to_string(w.started() - started_before), r);
    double worst = 0;
    for (std::size_t i = 0; i < single.parameters().size(); ++i) {
      const auto a = parallel.parameters()[i].to_vector<double>(), b = single.parameters()[i].to_vector<double>();
      for (std::size_t j = 0; j < a.size(); ++j)
        worst = std::max(worst, std::fabs(a[j] - b[j]) / (std::fabs(b[j]) + 1e-3));
    }
    expect(worst < 1e-9,
           "data-parallel parameters match single-process training" + how + " (worst " + std::to_string(worst) + ")",
           r);
    expect(std::fabs(reports.back().train_loss - single_reports.back().train_loss) <
               1e-9 * single_reports.back().train_loss,
           "the global epoch loss" + how, r);
    const auto h = double(dist::parameter_checksum(parallel) >> 11);
    expect(-w.allreduce(-h, dist::Combine::max) == w.allreduce(h, dist::Combine::max),
           "replicas bitwise identical" + how, r);
    if (r == 0) {
      std::printf("train%s: worst relative difference %.3g, final loss %.6f\n", how.c_str(), worst,
                  reports.back().train_loss);
    }
  }
}

// The diabetes data split by rows over the ranks (rank 0 gets none of them on 3 or more ranks, to
// check that an empty share works): coefficients and intercept within 1e-6 of the closed form on
// all rows in one process, and the same on every rank.
void distributed_regression(Backend& be) {
  dist::Communicator& w = dist::Communicator::world();
  const int r = w.rank(), s = w.size();
  data::Dataset all = data::read_csv(std::string(TANDEM_DATA_DIR) + "/diabetes_data_raw.csv.gz");
  data::attach_targets(all, data::read_csv(std::string(TANDEM_DATA_DIR) + "/diabetes_target.csv.gz"));
  const int holders = s >= 3 ? s - 1 : s, me = s >= 3 ? r - 1 : r;
  data::Dataset mine;
  mine.cols = all.cols;
  mine.source = "diabetes, rank " + std::to_string(r) + "'s rows";
  if (me >= 0) {
    const std::size_t lo = all.rows * std::size_t(me) / std::size_t(holders);
    const std::size_t hi = all.rows * std::size_t(me + 1) / std::size_t(holders);
    mine.rows = hi - lo;
    mine.features.assign(all.features.begin() + std::ptrdiff_t(lo * all.cols),
                         all.features.begin() + std::ptrdiff_t(hi * all.cols));
    mine.targets.assign(all.targets.begin() + std::ptrdiff_t(lo), all.targets.begin() + std::ptrdiff_t(hi));
  }
  const ml::LinearModel got = dist::fit_linear_regression(w, be, mine);
  const ml::LinearModel want = ml::fit_linear_regression(be, all);
  double worst = std::fabs(got.intercept - want.intercept) / std::fabs(want.intercept);
  for (std::size_t c = 0; c < want.coefficients.size(); ++c) {
    worst = std::max(worst, std::fabs(got.coefficients[c] - want.coefficients[c]) / std::fabs(want.coefficients[c]));
  }
  expect(worst < 1e-6, "distributed coefficients match the closed form (worst " + std::to_string(worst) + ")", r);
  const double c0 = got.coefficients[0];
  expect(-w.allreduce(-c0, dist::Combine::max) == w.allreduce(c0, dist::Combine::max), "the same model on every rank",
         r);
  if (r == 0) std::printf("regress: worst relative difference %.3g\n", worst);
}

}  // namespace

// One process: sum, mean and max over a single rank leave every element as it was.
int local(const std::string& name) {
  Backend* be = nullptr;
  try {
    be = &get_backend(name);
  } catch (const BackendUnavailable& e) {
    std::printf("SKIPPED: %s\n", e.what());
    return 0;
  }
  dist::Communicator& w = dist::Communicator::world();
  if (w.size() != 1) {
    std::printf("local: run this mode without mpirun\n");
    return 1;
  }
  std::vector<float> h(100003);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = float(i % 977) - 400.5f;
  Buffer x = Buffer::from(*be, h);
  for (dist::Combine op : {dist::Combine::sum, dist::Combine::mean, dist::Combine::max}) w.allreduce(x, op);
  std::vector<std::int32_t> hi = {1, -2, 2147483647};
  Buffer xi = Buffer::from(*be, hi);
  w.allreduce(xi, dist::Combine::sum);
  const bool ok = x.to_vector<float>() == h && xi.to_vector<std::int32_t>() == hi;
  std::printf("local on %s: %s\n", be->name().c_str(), ok ? "all passed" : "FAILED: allreduce changed the data");
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "collectives";
  if (mode == "local") return local(argc > 2 ? argv[2] : "openmp");
  dist::Communicator& w = dist::Communicator::world();
  try {
    Backend& be = get_backend(argc > 2 ? argv[2] : "openmp");
    if (mode == "throw") {
      if (w.rank() == 1) throw InvalidArgument("rank 1 failed on purpose");
      w.barrier();  // the other ranks wait here for a rank that will never come
      std::printf("rank %d passed the barrier: the failure did not end the job\n", w.rank());
      return 1;
    }
    if (mode == "train") {
      data_parallel(be);
    } else if (mode == "regress") {
      distributed_regression(be);
    } else {
      collectives(be);
      collectives_of_many(be);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", w.rank(), e.what());
    std::fflush(stderr);
#ifdef TANDEM_TEST_HAVE_MPI
    MPI_Abort(MPI_COMM_WORLD, 3);  // a program's choice (the library never aborts): end every rank
#endif
    return 3;
  }
  const double failed = w.allreduce(double(failures), dist::Combine::sum);
  if (w.rank() == 0) {
    if (failed == 0) {
      std::printf("%s: all passed on %d ranks\n", mode.c_str(), w.size());
    } else {
      std::printf("%s: %g failures\n", mode.c_str(), failed);
    }
  }
  return failed == 0 ? 0 : 1;
}
