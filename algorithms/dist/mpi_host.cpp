// tandem::dist's MPI layer (see mpi_host.hpp).
#include "mpi_host.hpp"

#include <algorithm>
#include <string>
#include <thread>

#include "tandem/errors.hpp"

namespace tandem::dist::internal {

void check_reducible(DType t, Combine op, const char* what) {
  if (t != DType::f32 && t != DType::f64 && t != DType::i32) {
    throw Unsupported(std::string(what) + ": " + std::string(name_of(t)) +
                      " buffers are not reduced across processes; convert them to f32 first");
  }
  if (t == DType::i32 && op == Combine::mean) {
    throw InvalidArgument(std::string(what) + ": the mean of i32 buffers is not an i32; convert them to f32 or f64");
  }
}

#ifdef TANDEM_HAVE_MPI

namespace {

// The mean from the sum, on the host.
template <class T>
void divide(T* v, std::size_t n, double by) {
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(double(v[i]) / by);
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

}  // namespace

MPI_Comm g_comm = MPI_COMM_NULL;
bool g_owns_mpi = false;

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw DeviceError(std::string("MPI error in ") + what + ": " + std::string(text, static_cast<std::size_t>(len)));
}

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

void reduce_host(void* data, std::size_t count, DType t, Combine op, int size, MPI_Comm comm, bool polite) {
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

void same_shape(MPI_Comm comm, std::int64_t count, int dtype, const char* what, bool polite) {
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

}  // namespace tandem::dist::internal
