// What tandem::dist's parts share: the MPI communicator tandem works on (its own duplicate of
// MPI_COMM_WORLD, errors returned instead of aborting, so that an MPI failure is a DeviceError the
// caller can see and the program's own communicator keeps its settings) and reductions of host
// memory over it. Internal.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "tandem/dist.hpp"

#ifdef TANDEM_HAVE_MPI
#include <mpi.h>
#endif

namespace tandem::dist::internal {

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The dtypes a reduction takes (f32, f64, i32; no mean of i32), and what the message says otherwise.
void check_reducible(DType t, Combine op, const char* what);

#ifdef TANDEM_HAVE_MPI
extern MPI_Comm g_comm;   // tandem's duplicate of MPI_COMM_WORLD (Communicator::world())
extern bool g_owns_mpi;   // tandem initialised MPI, and finalises it at exit

// Counts in MPI are int: large arrays go in pieces.
constexpr std::size_t kPiece = std::size_t(1) << 28;

// Throws DeviceError with MPI's text for rc.
void check(int rc, const char* what);
// Registered with atexit by world(): stops the communication thread, frees g_comm, finalises.
void finalize_at_exit();
// communicator.cpp: stops world()'s communication thread; may_finalize false when it is stuck in MPI.
void stop_background_at_exit(bool& may_finalize);

// In place over host memory: every rank ends with the same combined values. Floating point:
// reduce to rank 0, then broadcast (bitwise the same result everywhere); integers: one allreduce.
// polite: non-blocking calls waited for without taking the core from the caller's computation.
void reduce_host(void* data, std::size_t count, DType t, Combine op, int size, MPI_Comm comm = g_comm,
                 bool polite = false);
// Every rank passed the same count and dtype, or every rank raises ShapeMismatch.
void same_shape(MPI_Comm comm, std::int64_t count, int dtype, const char* what, bool polite = false);
#endif

}  // namespace tandem::dist::internal
