// tandem::dist: several processes working as one, over MPI (Open MPI from Debian). A Communicator
// reduces and broadcasts Buffers of any backend, staged through host memory (download, MPI on the
// host, upload): the path for CPU backends and for GPUs without CUDA-aware MPI. Built with CUDA
// and NCCL, allreduce of CUDA device buffers goes through NCCL on the device instead (several
// buffers as one NCCL group; its max leaves NaN handling to NCCL; one CUDA device per process).
//
// Floating-point reductions are a reduce to rank 0 followed by a broadcast, not MPI_Allreduce:
// every rank then holds bitwise the same result, which keeps data-parallel replicas identical
// (an allreduce may add in a different order on each rank).
//
// Built without MPI (TANDEM_ENABLE_MPI=OFF), world() is a communicator of one process whose
// operations leave the data as it is, so code written for several processes runs on one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tandem/buffer.hpp"
#include "tandem/mlp.hpp"
#include "tandem/regression.hpp"

namespace tandem::dist {

enum class Combine { sum, mean, max };

namespace detail {
struct Background;  // started allreduces and the thread that reduces them
}

// Whether this library was built with MPI.
bool built_with_mpi();

class Communicator {
 public:
  // Every process of the job. Initialises MPI when the program has not (and then finalises it
  // at exit).
  static Communicator& world();

  int rank() const { return rank_; }
  int size() const { return size_; }
  void barrier();

  // In place on every rank: x = combine over the ranks of x, elementwise. f32, f64 or i32 (i32:
  // sum wraps modulo 2^32 as on every backend; mean is not offered). max propagates NaN. Every
  // rank must pass the same dtype and size: a mismatch raises ShapeMismatch on every rank.
  void allreduce(Buffer& x, Combine op = Combine::sum);
  // Several buffers of one dtype, packed into host buckets of about bucket_bytes each (gradients).
  void allreduce(std::vector<Buffer>& xs, Combine op, std::size_t bucket_bytes = std::size_t(4) << 20);
  // Host values (scalars, small vectors).
  void allreduce(std::vector<double>& values, Combine op);
  double allreduce(double value, Combine op);
  // Every rank's x becomes root's x.
  void broadcast(Buffer& x, int root = 0);

  // A sum over the ranks that runs while the caller goes on (gradients reduced during backward):
  // start_allreduce queues it (the buffers are staged to the host on the spot and reduced by a
  // communication thread on a communicator of its own; CUDA device buffers with NCCL go on a
  // communication stream after the work queued so far), finish_allreduces waits for every one
  // started and writes the results back (it rethrows the first error, on every rank for a shape
  // mismatch). Between the two the buffers must not be written and this communicator must not be
  // used otherwise. Every rank starts the same sequence. The host path needs MPI initialised with
  // MPI_THREAD_SERIALIZED or more (as world() does; Unsupported otherwise).
  // While any are pending, every other call of this communicator raises InvalidArgument (the
  // communication thread may be inside MPI). Host and CUDA (NCCL) buffers are not started in one
  // sequence: the NCCL path checks the shapes on the calling thread.
  void start_allreduce(std::vector<Buffer> xs, Combine op = Combine::sum);
  void finish_allreduces();
  // After an error between start and finish: waits (up to 10 s) for the started allreduces to end
  // and drops them, leaving the buffers as they are; if they do not end (another rank never
  // joined), they stay pending.
  void discard_allreduces();

  // Seconds the caller spent in allreduce and broadcast so far (staging included); of a
  // started allreduce, only staging and the wait in finish_allreduces: what was not hidden.
  double seconds() const { return seconds_; }
  // How many allreduces were started (start_allreduce) so far.
  std::size_t started() const { return started_; }

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

 private:
  Communicator(int rank, int size);
  void check_same_shape(std::int64_t count, int dtype, const char* what);
  void check_idle(const char* what);
  int rank_ = 0, size_ = 1;
  double seconds_ = 0;
  std::size_t started_ = 0;
  std::unique_ptr<detail::Background> background_;
};

struct DataParallelOptions {
  // Start each layer's gradient sum as soon as backward has it, so that it runs while backward
  // computes the layers before (one bucket per layer); off: one bucketed allreduce after backward.
  // Whether it helps depends on the machine (README, "Several processes: MPI").
  bool overlap = false;
  std::size_t bucket_bytes = std::size_t(4) << 20;  // without overlap
};

// Data-parallel training: every rank holds a replica of `model` (rank 0's parameters are
// broadcast first, so the replicas start identical) and the whole training set, draws the same
// shuffled order (options.seed), trains on its share of each global batch of options.batch_size
// rows, and before each step the gradients are summed over the ranks (each weighted by its share
// of the batch, in buckets), so every replica takes the step single-process training would take
// on the whole batch. The reports' train_loss is the global one. With TANDEM_DIST_CHECK=1 the
// replicas' parameters are compared (a checksum of their bits) after every epoch, and a
// difference raises DeviceError naming the epoch.
std::vector<ml::EpochReport> train(Communicator& comm, ml::Mlp& model, const data::Dataset& train_set,
                                   const data::Dataset* test, ml::TrainOptions options,
                                   const std::function<void(const ml::EpochReport&)>& on_epoch = {},
                                   const DataParallelOptions& parallel = {});

// Linear regression with an intercept on data split by rows over the ranks: each rank passes its
// own rows (any number, 0 included). The columns are centred on the global means (allreduced
// sums), each rank forms X^T X and X^T y of its rows on the backend (f64 matmuls), those are
// summed over the ranks, and every rank solves the same normal equations (Cholesky of the
// column-scaled Gram matrix, in double on the host): one pass over the data, the same model on
// every rank. The normal equations square the condition number: for ill-conditioned data
// (beyond about 1e6 after centring and scaling) gather the rows and use ml::fit_linear_regression.
// Rank-deficient features raise InvalidArgument naming the column, on every rank.
ml::LinearModel fit_linear_regression(Communicator& comm, Backend& backend, const data::Dataset& own_rows);

// A checksum of the model's parameters (their bits), the same on every rank when the replicas
// are identical.
std::uint64_t parameter_checksum(const ml::Mlp& model);

}  // namespace tandem::dist
