// tandem::dist over MPI (see dist.hpp). tandem works on its own duplicate of MPI_COMM_WORLD, with
// errors returned instead of aborting, so that an MPI failure is a DeviceError the caller can see
// and the program's own communicator keeps its settings.
#include "tandem/dist.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "tandem/errors.hpp"

#ifdef TANDEM_HAVE_MPI
#include <mpi.h>
#endif
#ifdef TANDEM_HAVE_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace tandem::dist {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The dtypes a reduction takes, and what the message says otherwise.
void check_reducible(DType t, Combine op, const char* what) {
  if (t != DType::f32 && t != DType::f64 && t != DType::i32) {
    throw Unsupported(std::string(what) + ": " + std::string(name_of(t)) +
                      " buffers are not reduced across processes; convert them to f32 first");
  }
  if (t == DType::i32 && op == Combine::mean) {
    throw InvalidArgument(std::string(what) + ": the mean of i32 buffers is not an i32; convert them to f32 or f64");
  }
}

// The mean from the sum, on the host.
template <class T>
void divide(T* v, std::size_t n, double by) {
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(double(v[i]) / by);
}

#ifdef TANDEM_HAVE_MPI

MPI_Comm g_comm = MPI_COMM_NULL;
bool g_owns_mpi = false;

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw DeviceError(std::string("MPI error in ") + what + ": " + std::string(text, static_cast<std::size_t>(len)));
}

void stop_background_at_exit(bool& may_finalize);

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  bool may_finalize = true;
  stop_background_at_exit(may_finalize);
  if (!may_finalize) return;
  if (g_comm != MPI_COMM_NULL) MPI_Comm_free(&g_comm);
  if (g_owns_mpi) MPI_Finalize();
}

// max that propagates NaN (as tandem's reductions do; MPI_MAX leaves it to the implementation).
template <class T>
void nan_max(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    if (b[i] != b[i]) continue;
    if (a[i] != a[i] || a[i] > b[i]) b[i] = a[i];
  }
}

MPI_Datatype mpi_type(DType t, Combine op) {
  switch (t) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    default:  // i32: sums as unsigned, which wrap (signed overflow is undefined)
      return op == Combine::max ? MPI_INT32_T : MPI_UINT32_T;
  }
}

MPI_Op mpi_op(DType t, Combine op) {
  static MPI_Op max_f32 = MPI_OP_NULL, max_f64 = MPI_OP_NULL;
  if (op != Combine::max) return MPI_SUM;
  if (t == DType::i32) return MPI_MAX;
  MPI_Op& slot = t == DType::f32 ? max_f32 : max_f64;
  if (slot == MPI_OP_NULL) {
    check(MPI_Op_create(t == DType::f32 ? &nan_max<float> : &nan_max<double>, 1, &slot), "MPI_Op_create");
  }
  return slot;
}

// Counts in MPI are int: large arrays go in pieces.
constexpr std::size_t kPiece = std::size_t(1) << 28;

// Waits for a non-blocking operation, yielding the core between tests: Open MPI's blocking calls
// poll without yielding, and take the core the caller's computation needs when a communication
// thread runs beside it (the communication thread's calls wait this way). Open MPI's non-blocking
// collectives move only when tested, so the tests cannot be far apart (sleeping 50 us between
// them made each sum 10x slower).
void wait_politely(MPI_Request& request, const char* what) {
  for (;;) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    std::this_thread::yield();
  }
}

// In place over host memory: every rank ends with the same combined values. Floating point:
// reduce to rank 0, then broadcast (bitwise the same result everywhere); integers: one allreduce.
// polite: non-blocking calls waited for with wait_politely.
void reduce_host(void* data, std::size_t count, DType t, Combine op, int size, MPI_Comm comm = g_comm,
                 bool polite = false) {
  auto* bytes = static_cast<unsigned char*>(data);
  const std::size_t elem = size_of(t);
  const MPI_Datatype type = mpi_type(t, op);
  const MPI_Op mop = mpi_op(t, op);
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  for (std::size_t at = 0; at < count; at += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, count - at));
    void* p = bytes + at * elem;
    MPI_Request request = MPI_REQUEST_NULL;
    if (t == DType::i32) {
      if (polite) {
        check(MPI_Iallreduce(MPI_IN_PLACE, p, n, type, mop, comm, &request), "allreduce");
        wait_politely(request, "allreduce");
      } else {
        check(MPI_Allreduce(MPI_IN_PLACE, p, n, type, mop, comm), "allreduce");
      }
      continue;
    }
    if (polite) {
      check(MPI_Ireduce(rank == 0 ? MPI_IN_PLACE : p, p, n, type, mop, 0, comm, &request), "allreduce (reduce)");
      wait_politely(request, "allreduce (reduce)");
    } else {
      check(MPI_Reduce(rank == 0 ? MPI_IN_PLACE : p, p, n, type, mop, 0, comm), "allreduce (reduce)");
    }
    if (rank == 0 && op == Combine::mean) {
      if (t == DType::f32) {
        divide(static_cast<float*>(p), std::size_t(n), size);
      } else {
        divide(static_cast<double*>(p), std::size_t(n), size);
      }
    }
    if (polite) {
      check(MPI_Ibcast(p, n, type, 0, comm, &request), "allreduce (broadcast)");
      wait_politely(request, "allreduce (broadcast)");
    } else {
      check(MPI_Bcast(p, n, type, 0, comm), "allreduce (broadcast)");
    }
  }
}

// Every rank passed the same count and dtype, or every rank raises ShapeMismatch.
void same_shape(MPI_Comm comm, std::int64_t count, int dtype, const char* what, bool polite = false) {
  std::int64_t v[4] = {count, -count, dtype, -dtype};
  if (polite) {
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(MPI_IN_PLACE, v, 4, MPI_INT64_T, MPI_MAX, comm, &request), what);
    wait_politely(request, what);
  } else {
    check(MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_INT64_T, MPI_MAX, comm), what);
  }
  if (v[0] != -v[1] || v[2] != -v[3]) {
    throw ShapeMismatch(std::string(what) + ": the ranks passed different buffers (from " + std::to_string(-v[1]) +
                        " to " + std::to_string(v[0]) + " elements" + (v[2] != -v[3] ? ", and different dtypes" : "") +
                        "); every rank must pass the same shape");
  }
}

#endif

#ifdef TANDEM_HAVE_NCCL
// CUDA device buffers are reduced by NCCL on the device (no host staging): one NCCL communicator
// per process, over the ranks of the job (its id broadcast over MPI), on the device of the first
// CUDA buffer reduced.
int cuda_device_of(const Buffer& x) {
  const std::string n = x.backend().name();
  if (n == "cuda") return 0;
  if (n.rfind("cuda:", 0) == 0) return std::stoi(n.substr(5));
  return -1;
}

void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw DeviceError(std::string("NCCL error in ") + what + ": " + ncclGetErrorString(r));
}

ncclComm_t nccl_comm(int device, int rank, int size) {
  static ncclComm_t comm = nullptr;  // kept for the process's life
  static int comm_device = -1;
  if (comm != nullptr) {
    if (comm_device != device) {
      throw Unsupported("allreduce: NCCL serves one CUDA device per process, and this one already uses cuda:" +
                        std::to_string(comm_device) + "; reduce cuda:" + std::to_string(device) +
                        " buffers in another process");
    }
    return comm;
  }
  ncclUniqueId id;
  if (rank == 0) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
#ifdef TANDEM_HAVE_MPI
  if (size > 1) check(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, g_comm), "broadcasting the NCCL id");
#endif
  if (cudaSetDevice(device) != cudaSuccess)
    throw DeviceError("allreduce: cannot select cuda:" + std::to_string(device));
  nccl_check(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank");
  comm_device = device;
  return comm;
}

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw DeviceError(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

// In place on the device, queued on `stream` (by default the backend's queue 0, CUDA's default
// stream, after the work before it); false (nothing done) when the buffers are not CUDA device
// memory. Several buffers go as one NCCL group.
bool nccl_allreduce(std::span<Buffer> xs, Combine op, int rank, int size, cudaStream_t stream = nullptr) {
  const int device = cuda_device_of(xs.front());
  if (device < 0) return false;
  const ncclComm_t comm = nccl_comm(device, rank, size);
  const ncclRedOp_t nop = op == Combine::sum ? ncclSum : op == Combine::mean ? ncclAvg : ncclMax;
  nccl_check(ncclGroupStart(), "ncclGroupStart");
  for (Buffer& x : xs) {
    const ncclDataType_t type = x.dtype() == DType::f32   ? ncclFloat32
                                : x.dtype() == DType::f64 ? ncclFloat64
                                                          : ncclInt32;
    nccl_check(ncclAllReduce(x.data(), x.data(), x.size(), type, nop, comm, stream), "ncclAllReduce");
  }
  nccl_check(ncclGroupEnd(), "ncclGroupEnd");
  return true;
}

// Started allreduces of CUDA buffers run on a communication stream of their own: it waits for
// the work queued on the default stream so far, and the default stream waits for it in finish.
struct CommStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr, done = nullptr;
};

CommStream& comm_stream() {
  static CommStream c = [] {
    CommStream s;
    cuda_check(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "creating the communication stream");
    cuda_check(cudaEventCreateWithFlags(&s.ready, cudaEventDisableTiming), "cudaEventCreate");
    cuda_check(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming), "cudaEventCreate");
    return s;
  }();
  return c;
}

bool g_nccl_pending = false;  // a started NCCL allreduce (the stream exists only once one was)

int g_nccl_device = 0;  // of the started NCCL allreduces

bool nccl_start(std::span<Buffer> xs, Combine op, int rank, int size) {
  const int device = cuda_device_of(xs.front());
  if (device < 0) return false;
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
  g_nccl_pending = true;
  g_nccl_device = device;
  CommStream& c = comm_stream();
  cuda_check(cudaEventRecord(c.ready, nullptr), "cudaEventRecord");
  cuda_check(cudaStreamWaitEvent(c.stream, c.ready, 0), "cudaStreamWaitEvent");
  nccl_allreduce(xs, op, rank, size, c.stream);
  return true;
}

void nccl_finish() {
  if (!g_nccl_pending) return;
  g_nccl_pending = false;
  cuda_check(cudaSetDevice(g_nccl_device), "cudaSetDevice");
  CommStream& c = comm_stream();
  cuda_check(cudaEventRecord(c.done, c.stream), "cudaEventRecord");
  cuda_check(cudaStreamWaitEvent(nullptr, c.done, 0), "cudaStreamWaitEvent");
}
#endif

// The allreduces started and not yet finished, and (host path) the thread that reduces them on a
// communicator of its own while the caller computes.
struct Job {
  std::vector<Buffer> xs;
  std::vector<unsigned char> host;  // the buffers packed, reduced in place
  DType dtype = DType::f32;
  Combine op = Combine::sum;
};

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

#ifdef TANDEM_HAVE_MPI
void stop_background_at_exit(bool& may_finalize) {
  if (g_background == nullptr) return;
  may_finalize = g_background->stop_thread();
  if (may_finalize && g_background->comm != MPI_COMM_NULL) MPI_Comm_free(&g_background->comm);
}
#endif

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
#ifdef TANDEM_HAVE_NCCL
  if (cuda_device_of(xs.front()) >= 0) {
    // On this thread (NCCL needs no communication thread): every rank passed the same buffers.
    std::int64_t total = 0;
    for (const Buffer& b : xs) total += static_cast<std::int64_t>(b.size());
    check_same_shape(total, static_cast<int>(t) * 4096 + static_cast<int>(std::min<std::size_t>(xs.size(), 4095)),
                     "allreduce (started)");
  }
  if (nccl_start(std::span<Buffer>(xs), op, rank_, size_)) {
    seconds_ += since(t0);
    return;
  }
#endif
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
#ifdef TANDEM_HAVE_NCCL
  nccl_finish();
#endif
  detail::Background& bg = *background_;
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
#ifdef TANDEM_HAVE_NCCL
  nccl_finish();
#endif
  detail::Background& bg = *background_;
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
#ifdef TANDEM_HAVE_NCCL
  if (nccl_allreduce(std::span<Buffer>(&x, 1), op, rank_, size_)) {
    seconds_ += since(t0);
    return;
  }
#endif
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
#ifdef TANDEM_HAVE_NCCL
  if (nccl_allreduce(std::span<Buffer>(xs), op, rank_, size_)) {
    seconds_ += since(t0);
    return;
  }
#endif
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

ml::LinearModel fit_linear_regression(Communicator& comm, Backend& be, const data::Dataset& d) {
  const std::size_t p = d.cols;
  if (d.rows > 0 && d.targets.size() != d.rows) {
    throw InvalidArgument("distributed regression: " + d.source + " has no targets (one per row)");
  }
  // Every rank must agree on the number of features before anything is summed.
  std::vector<double> shape = {double(p), -double(p)};
  comm.allreduce(shape, Combine::max);
  if (shape[0] != -shape[1])
    throw ShapeMismatch("distributed regression: the ranks' data have different feature counts");
  // Global count and means of the columns and of y.
  std::vector<double> sums(p + 2, 0.0);
  for (std::size_t r = 0; r < d.rows; ++r) {
    for (std::size_t c = 0; c < p; ++c) sums[c] += d.features[r * p + c];
    sums[p] += d.targets[r];
  }
  sums[p + 1] = double(d.rows);
  comm.allreduce(sums, Combine::sum);
  const double n = sums[p + 1];
  if (n < double(p + 1)) {
    throw InvalidArgument("distributed regression: " + std::to_string(static_cast<long long>(n)) + " samples for " +
                          std::to_string(p + 1) + " coefficients; least squares needs at least as many samples");
  }
  std::vector<double> mean(p);
  for (std::size_t c = 0; c < p; ++c) mean[c] = sums[c] / n;
  const double y_mean = sums[p] / n;
  // This rank's [X - mean | y - y_mean] (rows, p + 1) and its Gram matrix (p + 1, p + 1), which
  // holds X^T X in its leading block and X^T y in its last column.
  std::vector<double> gram((p + 1) * (p + 1), 0.0);
  if (d.rows > 0) {
    std::vector<double> a(d.rows * (p + 1));
    for (std::size_t r = 0; r < d.rows; ++r) {
      for (std::size_t c = 0; c < p; ++c) a[r * (p + 1) + c] = d.features[r * p + c] - mean[c];
      a[r * (p + 1) + p] = d.targets[r] - y_mean;
    }
    const auto rows = static_cast<std::int64_t>(d.rows), cols = static_cast<std::int64_t>(p + 1);
    const Matrix am = matrix(Buffer::from(be, a), rows, cols);
    Matrix gm = matrix(Buffer(be, DType::f64, gram.size()), cols, cols);
    MatmulOptions o;
    o.trans_a = Transpose::yes;
    matmul(am, am, gm, o);
    gram = gm.buffer.to_vector<double>();
  }
  comm.allreduce(gram, Combine::sum);
  // Cholesky of D^-1 G D^-1 (D = sqrt(diag G)): scaling makes the pivots comparable.
  std::vector<double> scale(p), g(p * p), h(p);
  for (std::size_t c = 0; c < p; ++c) {
    const double diag = gram[c * (p + 1) + c];
    if (!(diag > 0)) {
      throw InvalidArgument("distributed regression: feature column " + std::to_string(c) +
                            " is constant over all ranks' rows; drop it");
    }
    scale[c] = std::sqrt(diag);
  }
  for (std::size_t i = 0; i < p; ++i) {
    for (std::size_t j = 0; j < p; ++j) g[i * p + j] = gram[i * (p + 1) + j] / (scale[i] * scale[j]);
    h[i] = gram[i * (p + 1) + p] / scale[i];
  }
  for (std::size_t j = 0; j < p; ++j) {  // g = L L^T, L in the lower triangle
    double diag = g[j * p + j];
    for (std::size_t k = 0; k < j; ++k) diag -= g[j * p + k] * g[j * p + k];
    if (!(diag > 1e-12)) {
      throw InvalidArgument("distributed regression: feature column " + std::to_string(j) +
                            " is a linear combination of the columns before it (rank-deficient data); drop it");
    }
    g[j * p + j] = std::sqrt(diag);
    for (std::size_t i = j + 1; i < p; ++i) {
      double v = g[i * p + j];
      for (std::size_t k = 0; k < j; ++k) v -= g[i * p + k] * g[j * p + k];
      g[i * p + j] = v / g[j * p + j];
    }
  }
  std::vector<double> z(p);
  for (std::size_t i = 0; i < p; ++i) {  // L z = h
    double v = h[i];
    for (std::size_t k = 0; k < i; ++k) v -= g[i * p + k] * z[k];
    z[i] = v / g[i * p + i];
  }
  ml::LinearModel model;
  model.coefficients.assign(p, 0.0);
  for (std::size_t ii = p; ii-- > 0;) {  // L^T b' = z, then b = D^-1 b'
    double v = z[ii];
    for (std::size_t k = ii + 1; k < p; ++k) v -= g[k * p + ii] * model.coefficients[k];
    model.coefficients[ii] = v / g[ii * p + ii];
  }
  for (std::size_t c = 0; c < p; ++c) model.coefficients[c] /= scale[c];
  model.intercept = y_mean;
  for (std::size_t c = 0; c < p; ++c) model.intercept -= mean[c] * model.coefficients[c];
  model.converged = true;
  return model;
}

std::uint64_t parameter_checksum(const ml::Mlp& model) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over every parameter's bytes
  for (const Buffer& p : model.parameters()) {
    std::vector<unsigned char> bytes(p.bytes());
    p.download_bytes(bytes.data(), bytes.size());
    for (unsigned char b : bytes) h = (h ^ b) * 1099511628211ull;
  }
  return h;
}

std::vector<ml::EpochReport> train(Communicator& comm, ml::Mlp& model, const data::Dataset& train_set,
                                   const data::Dataset* test, ml::TrainOptions options,
                                   const std::function<void(const ml::EpochReport&)>& on_epoch,
                                   const DataParallelOptions& parallel) {
  for (Buffer& p : model.parameters()) comm.broadcast(p, 0);
  options.replica = static_cast<std::size_t>(comm.rank());
  options.replicas = static_cast<std::size_t>(comm.size());
  // Each replica's gradient is the mean over its rows: weighted by its share of the batch, the
  // replicas' gradients sum to the batch's.
  auto weigh = [](std::vector<Buffer>& grads, std::size_t own_rows, std::size_t batch_rows) {
    if (own_rows == batch_rows || own_rows == 0) return;
    for (Buffer& g : grads) scale(double(own_rows) / double(batch_rows), g, g);
  };
  if (parallel.overlap && comm.size() > 1) {
    // Each layer's gradients are summed while backward computes the layers before; the step
    // waits for all of them. A replica with no rows ran no backward: it sends its zeros now.
    auto started = std::make_shared<bool>(false);
    options.gradients_ready = [&comm, weigh, started](ml::Mlp& m, std::size_t first, std::size_t count,
                                                      std::size_t own_rows, std::size_t batch_rows) {
      std::vector<Buffer> grads(m.gradients().begin() + std::ptrdiff_t(first),
                                m.gradients().begin() + std::ptrdiff_t(first + count));
      weigh(grads, own_rows, batch_rows);
      comm.start_allreduce(std::move(grads), Combine::sum);
      *started = true;
    };
    options.combine_gradients = [&comm, started](ml::Mlp& m, std::size_t, std::size_t) {
      if (!*started) {
        for (std::size_t i = m.gradients().size(); i >= 2; i -= 2) {
          comm.start_allreduce({m.gradients()[i - 2], m.gradients()[i - 1]}, Combine::sum);
        }
      }
      *started = false;
      comm.finish_allreduces();
    };
  } else {
    options.combine_gradients = [&comm, weigh, bucket = parallel.bucket_bytes](ml::Mlp& m, std::size_t own_rows,
                                                                               std::size_t batch_rows) {
      std::vector<Buffer> grads = m.gradients();  // handles: the reduction writes the model's gradients
      if (comm.size() == 1) return;
      weigh(grads, own_rows, batch_rows);
      comm.allreduce(grads, Combine::sum, bucket);
    };
  }
  options.sum_over_replicas = [&comm](double v) { return comm.allreduce(v, Combine::sum); };
  const char* check = std::getenv("TANDEM_DIST_CHECK");
  const bool checking = check != nullptr && std::string(check) == "1";
  auto each_epoch = [&](const ml::EpochReport& rep) {
    if (checking) {
      const auto h = static_cast<double>(parameter_checksum(model) >> 11);  // exact in a double
      const double lo = -comm.allreduce(-h, Combine::max), hi = comm.allreduce(h, Combine::max);
      if (lo != hi) {
        throw DeviceError("data-parallel training: the replicas' parameters differ after epoch " +
                          std::to_string(rep.epoch) + " (rank " + std::to_string(comm.rank()) + ")");
      }
    }
    if (on_epoch) on_epoch(rep);
  };
  try {
    return ml::train(model, train_set, test, options, each_epoch);
  } catch (...) {
    // An error between a layer's started sum and the step: let the communication thread end
    // (the other ranks took part, or it is left pending) and keep the gradients as they are.
    try {
      comm.discard_allreduces();
    } catch (...) {
    }
    throw;
  }
}

}  // namespace tandem::dist
