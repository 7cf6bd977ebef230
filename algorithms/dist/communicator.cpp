// tandem::dist's Communicator (see dist.hpp): allreduce and broadcast of buffers across the
// processes of a job. Buffers of a backend with a device collective (cuda: NCCL) are reduced on
// the device, on the backend's queues; the others are staged through the host and reduced over
// MPI (mpi_host.hpp), by a communication thread of their own when started (start_allreduce).
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "mpi_host.hpp"
#include "tandem/errors.hpp"

namespace tandem::dist {

using namespace internal;

namespace {

// The allreduces started and not yet finished, and (host path) the thread that reduces them on a
// communicator of its own while the caller computes.
struct Job {
  std::vector<Buffer> xs;
  std::vector<unsigned char> host;  // the buffers packed, reduced in place
  DType dtype = DType::f32;
  Combine op = Combine::sum;
};

DeviceCollective::Op collective_op(Combine op) {
  return op == Combine::sum    ? DeviceCollective::Op::sum
         : op == Combine::mean ? DeviceCollective::Op::mean
                               : DeviceCollective::Op::max;
}

// The MPI broadcast a device collective sets itself up with: rank 0's bytes to every rank.
void share_from_rank0(void* bytes, std::size_t n) {
#ifdef TANDEM_HAVE_MPI
  check(MPI_Bcast(bytes, static_cast<int>(n), MPI_BYTE, 0, g_comm), "broadcasting the device collective's id");
#else
  (void)bytes, (void)n;
#endif
}

// In place on the device, queued on q, when the buffers' backend has a device collective (cuda:
// NCCL); false, with nothing done, when it has none. Several buffers go as one group.
bool device_allreduce(std::span<Buffer> xs, Combine op, int rank, int size, Queue q) {
  DeviceCollective* c = xs.front().backend().collective();
  if (c == nullptr) return false;
  std::vector<DeviceCollective::Part> parts;
  parts.reserve(xs.size());
  for (Buffer& x : xs) parts.push_back({x.data(), x.size(), x.dtype()});
  c->allreduce(q, parts, collective_op(op), rank, size, share_from_rank0);
  return true;
}

}  // namespace

namespace detail {
struct Background {
  std::mutex m;
  std::condition_variable cv;
  std::deque<Job> jobs;             // the thread reduces jobs[taken] while more are added: a deque keeps it in place
  std::size_t taken = 0, done = 0;  // by the thread
  std::exception_ptr error;
  bool stop = false;
  std::thread thread;
  // Backends with allreduces started on their collective queue, which the default queue waits
  // for in finish_allreduces.
  std::vector<std::shared_ptr<Backend>> device_pending;
#ifdef TANDEM_HAVE_MPI
  MPI_Comm comm = MPI_COMM_NULL;

  void run(int size) {
    for (;;) {
      Job* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return stop || taken < jobs.size(); });
        if (taken == jobs.size()) return;
        job = &jobs[taken++];
      }
      std::exception_ptr failed;
      try {
        const std::size_t count = job->host.size() / size_of(job->dtype);
        same_shape(comm, static_cast<std::int64_t>(count), static_cast<int>(job->dtype), "allreduce (started)", true);
        reduce_host(job->host.data(), count, job->dtype, job->op, size, comm, true);
      } catch (...) {
        failed = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(m);
        if (failed && !error) error = failed;
        ++done;
      }
      cv.notify_all();
    }
  }
#endif

  // The default queue of each backend with started device allreduces waits for them.
  void finish_device() {
    for (const auto& be : device_pending) be->wait_event(Queue{}, be->record_event(be->collective_queue()));
    device_pending.clear();
  }

  bool pending() {
    std::lock_guard<std::mutex> lock(m);
    return !jobs.empty();
  }
  // Waits up to `limit` for the thread to finish the jobs started; true when it has.
  bool wait_done(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(m);
    return cv.wait_for(lock, limit, [&] { return done == jobs.size(); });
  }
  // At exit, before MPI is finalised: false when the thread is still inside MPI after a few
  // seconds (an allreduce started that the other ranks never joined), and MPI must then not be
  // finalised.
  bool stop_thread() {
    if (!thread.joinable()) return true;
    if (!wait_done(std::chrono::seconds(5))) {
      thread.detach();
      return false;
    }
    {
      std::lock_guard<std::mutex> lock(m);
      stop = true;
    }
    cv.notify_all();
    thread.join();
    return true;
  }
};
}  // namespace detail

namespace {
detail::Background* g_background = nullptr;  // world()'s, stopped at exit
}  // namespace

#ifdef TANDEM_HAVE_MPI
void internal::stop_background_at_exit(bool& may_finalize) {
  if (g_background == nullptr) return;
  may_finalize = g_background->stop_thread();
  if (may_finalize && g_background->comm != MPI_COMM_NULL) MPI_Comm_free(&g_background->comm);
}
#endif

namespace {

// The buffers of one call: one dtype, one backend.
DType check_list(const std::vector<Buffer>& xs, Combine op) {
  const DType t = xs.front().dtype();
  for (const Buffer& b : xs) {
    if (b.empty_handle()) throw InvalidArgument("allreduce: empty Buffer handle in the list");
    if (b.dtype() != t) throw DTypeMismatch("allreduce: the buffers of one call must share a dtype");
    if (&b.backend() != &xs.front().backend()) {
      throw DeviceMismatch("allreduce: the buffers of one call must be on one backend");
    }
  }
  check_reducible(t, op, "allreduce");
  return t;
}

}  // namespace

Communicator::Communicator(int rank, int size)
    : rank_(rank), size_(size), background_(std::make_unique<detail::Background>()) {}

Communicator::~Communicator() {
  if (g_background == background_.get()) g_background = nullptr;
  background_->stop_thread();
}

void Communicator::start_allreduce(std::vector<Buffer> xs, Combine op) {
  if (xs.empty()) return;
  [[maybe_unused]] const DType t = check_list(xs, op);
  const auto t0 = Clock::now();
  ++started_;
  Backend& be = xs.front().backend();
  if (be.collective() != nullptr) {
    // On this thread (a device collective needs no communication thread), on the backend's
    // collective queue after the work queued so far: every rank passed the same buffers.
    std::int64_t total = 0;
    for (const Buffer& b : xs) total += static_cast<std::int64_t>(b.size());
    check_same_shape(total, static_cast<int>(t) * 4096 + static_cast<int>(std::min<std::size_t>(xs.size(), 4095)),
                     "allreduce (started)");
    const Queue cq = be.collective_queue();
    be.wait_event(cq, be.record_event(Queue{}));
    device_allreduce(std::span<Buffer>(xs), op, rank_, size_, cq);
    auto& pending = background_->device_pending;
    if (std::find(pending.begin(), pending.end(), be.shared_from_this()) == pending.end()) {
      pending.push_back(be.shared_from_this());
    }
    seconds_ += since(t0);
    return;
  }
  if (size_ == 1) {
    seconds_ += since(t0);
    return;
  }
#ifdef TANDEM_HAVE_MPI
  detail::Background& bg = *background_;
  if (!bg.thread.joinable()) {
    int level = MPI_THREAD_SINGLE;
    check(MPI_Query_thread(&level), "MPI_Query_thread");
    if (level < MPI_THREAD_SERIALIZED) {
      throw Unsupported(
          "start_allreduce: MPI was initialised without MPI_THREAD_SERIALIZED, which the communication thread "
          "needs; initialise it with MPI_Init_thread(..., MPI_THREAD_SERIALIZED, ...) (or leave it to tandem), or "
          "train without overlap");
    }
    check(MPI_Comm_dup(g_comm, &bg.comm), "MPI_Comm_dup (communication thread)");
    check(MPI_Comm_set_errhandler(bg.comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    const int size = size_;
    bg.thread = std::thread([&bg, size] { bg.run(size); });
    g_background = &bg;
  }
  Job job;
  std::size_t bytes = 0;
  for (const Buffer& b : xs) bytes += b.bytes();
  job.host.resize(bytes);
  std::size_t at = 0;
  for (const Buffer& b : xs) {
    b.download_bytes(job.host.data() + at, b.bytes());
    at += b.bytes();
  }
  job.xs = std::move(xs);
  job.dtype = t;
  job.op = op;
  {
    std::lock_guard<std::mutex> lock(bg.m);
    bg.jobs.push_back(std::move(job));
  }
  bg.cv.notify_all();
#endif
  seconds_ += since(t0);
}

void Communicator::finish_allreduces() {
  const auto t0 = Clock::now();
  detail::Background& bg = *background_;
  bg.finish_device();
  std::deque<Job> jobs;
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(bg.m);
    bg.cv.wait(lock, [&] { return bg.done == bg.jobs.size(); });
    jobs.swap(bg.jobs);
    bg.taken = bg.done = 0;
    std::swap(error, bg.error);
  }
  if (error) {
    seconds_ += since(t0);
    std::rethrow_exception(error);
  }
  for (Job& job : jobs) {
    std::size_t at = 0;
    for (Buffer& b : job.xs) {
      b.upload_bytes(job.host.data() + at, b.bytes());
      at += b.bytes();
    }
  }
  seconds_ += since(t0);
}

bool built_with_mpi() {
#ifdef TANDEM_HAVE_MPI
  return true;
#else
  return false;
#endif
}

Communicator& Communicator::world() {
  static Communicator* w = [] {
#ifdef TANDEM_HAVE_MPI
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      g_owns_mpi = true;
    }
    check(MPI_Comm_dup(MPI_COMM_WORLD, &g_comm), "MPI_Comm_dup");
    check(MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    std::atexit(finalize_at_exit);
    int rank = 0, size = 1;
    check(MPI_Comm_rank(g_comm, &rank), "MPI_Comm_rank");
    check(MPI_Comm_size(g_comm, &size), "MPI_Comm_size");
    return new Communicator(rank, size);
#else
    return new Communicator(0, 1);
#endif
  }();
  return *w;
}

void Communicator::check_idle(const char* what) {
  if (background_->pending()) {
    throw InvalidArgument(std::string(what) +
                          ": allreduces started on this communicator are still pending; call "
                          "finish_allreduces() (or discard_allreduces() after an error) first");
  }
}

void Communicator::discard_allreduces() {
  detail::Background& bg = *background_;
  bg.finish_device();
  if (!bg.wait_done(std::chrono::seconds(10))) return;  // still inside MPI: they stay pending
  std::lock_guard<std::mutex> lock(bg.m);
  bg.jobs.clear();
  bg.taken = bg.done = 0;
  bg.error = nullptr;
}

void Communicator::barrier() {
  check_idle("barrier");
#ifdef TANDEM_HAVE_MPI
  check(MPI_Barrier(g_comm), "barrier");
#endif
}

// Every rank passed the same count and dtype, or every rank raises ShapeMismatch.
void Communicator::check_same_shape(std::int64_t count, int dtype, const char* what) {
  check_idle(what);
#ifdef TANDEM_HAVE_MPI
  if (size_ == 1) return;
  same_shape(g_comm, count, dtype, what);
#else
  (void)count, (void)dtype, (void)what;
#endif
}

void Communicator::allreduce(Buffer& x, Combine op) {
  if (x.empty_handle()) throw InvalidArgument("allreduce: empty Buffer handle");
  check_reducible(x.dtype(), op, "allreduce");
  const auto t0 = Clock::now();
  check_same_shape(static_cast<std::int64_t>(x.size()), static_cast<int>(x.dtype()), "allreduce");
  if (device_allreduce(std::span<Buffer>(&x, 1), op, rank_, size_, Queue{})) {
    seconds_ += since(t0);
    return;
  }
  if (size_ > 1) {
#ifdef TANDEM_HAVE_MPI
    std::vector<unsigned char> host(x.bytes());
    x.download_bytes(host.data(), host.size());
    reduce_host(host.data(), x.size(), x.dtype(), op, size_);
    x.upload_bytes(host.data(), host.size());
#endif
  }
  seconds_ += since(t0);
}

void Communicator::allreduce(std::vector<Buffer>& xs, Combine op, std::size_t bucket_bytes) {
  if (xs.empty()) return;
  const DType t = check_list(xs, op);
  std::int64_t total = 0;
  for (const Buffer& b : xs) total += static_cast<std::int64_t>(b.size());
  const auto t0 = Clock::now();
  check_same_shape(total, static_cast<int>(t) * 4096 + static_cast<int>(std::min<std::size_t>(xs.size(), 4095)),
                   "allreduce");
  if (device_allreduce(std::span<Buffer>(xs), op, rank_, size_, Queue{})) {
    seconds_ += since(t0);
    return;
  }
  if (size_ > 1) {
#ifdef TANDEM_HAVE_MPI
    const std::size_t elem = size_of(t);
    const std::size_t bucket = std::max(bucket_bytes, elem);
    // Buffers go into a bucket whole while it has room; a buffer larger than a bucket is a bucket.
    std::size_t first = 0;
    while (first < xs.size()) {
      std::size_t last = first, bytes = 0;
      while (last < xs.size() && (last == first || bytes + xs[last].bytes() <= bucket)) bytes += xs[last++].bytes();
      std::vector<unsigned char> host(bytes);
      std::size_t at = 0;
      for (std::size_t i = first; i < last; ++i) {
        xs[i].download_bytes(host.data() + at, xs[i].bytes());
        at += xs[i].bytes();
      }
      reduce_host(host.data(), bytes / elem, t, op, size_);
      at = 0;
      for (std::size_t i = first; i < last; ++i) {
        xs[i].upload_bytes(host.data() + at, xs[i].bytes());
        at += xs[i].bytes();
      }
      first = last;
    }
#else
    (void)bucket_bytes;
#endif
  }
  seconds_ += since(t0);
}

void Communicator::allreduce(std::vector<double>& values, Combine op) {
  const auto t0 = Clock::now();
  check_same_shape(static_cast<std::int64_t>(values.size()), static_cast<int>(DType::f64), "allreduce");
  if (size_ > 1 && !values.empty()) {
#ifdef TANDEM_HAVE_MPI
    reduce_host(values.data(), values.size(), DType::f64, op, size_);
#else
    (void)op;
#endif
  }
  seconds_ += since(t0);
}

double Communicator::allreduce(double value, Combine op) {
  std::vector<double> v = {value};
  allreduce(v, op);
  return v[0];
}

void Communicator::broadcast(Buffer& x, int root) {
  if (x.empty_handle()) throw InvalidArgument("broadcast: empty Buffer handle");
  if (root < 0 || root >= size_) {
    throw InvalidArgument("broadcast: root " + std::to_string(root) + " is not a rank of this job (0 to " +
                          std::to_string(size_ - 1) + ")");
  }
  const auto t0 = Clock::now();
  check_same_shape(static_cast<std::int64_t>(x.size()), static_cast<int>(x.dtype()), "broadcast");
  if (size_ > 1) {
#ifdef TANDEM_HAVE_MPI
    std::vector<unsigned char> host(x.bytes());
    if (rank_ == root) x.download_bytes(host.data(), host.size());
    for (std::size_t at = 0; at < host.size(); at += kPiece) {
      const int n = static_cast<int>(std::min(kPiece, host.size() - at));
      check(MPI_Bcast(host.data() + at, n, MPI_BYTE, root, g_comm), "broadcast");
    }
    if (rank_ != root) x.upload_bytes(host.data(), host.size());
#endif
  }
  seconds_ += since(t0);
}

}  // namespace tandem::dist
