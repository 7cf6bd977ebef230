// Where the openmp backend's team threads run: off the CPU of the thread that calls the op.
//
// After a pause (50 ms or more), Linux woke a sleeping OpenMP worker onto the CPU of the thread
// that woke it, the op's calling thread, though the worker's own CPU was idle; the calling thread
// then spun at the region's barrier (libgomp's default wait) while the worker waited behind it for
// that CPU. On a 2-vCPU Zen 4 EPYC an empty parallel region after a 0.25 s pause took 5.8 ms, and
// so did a sum of 64K or 1M floats (0.004 and 0.03 ms back to back; PyTorch's took 1.9 and 5.8
// ms); with the threads bound to cores (OMP_PROC_BIND) the region took 0.08 ms. So each worker is kept off the calling
// thread's CPU: its affinity is the caller's set less the CPU the caller runs on, set by the
// worker itself (see keep_team_off_caller_cpu for when). The calling thread's own affinity is
// never changed; the workers' masks stay set between ops, for every region on them (the
// application's own and OpenBLAS's too). Off where the user binds the threads (OMP_PROC_BIND,
// OMP_PLACES, GOMP_CPU_AFFINITY), sets TANDEM_OPENMP_PLACEMENT=off, or the OS refuses a worker's
// affinity. The application's own smaller regions on the calling thread can end placed workers
// and later start new ones where the OS puts them, until the next placement.
#pragma once

#include <string>

namespace tandem::openmp {

// Keeps the workers of the calling thread's team of `threads` off the CPU it runs on now: nothing
// when they already are (a look at the CPU, tens of nanoseconds), else one parallel region in
// which each worker sets its own affinity (about 0.1 ms after a pause): when the caller is found
// on another CPU, the team is larger than the last op's, or more or fewer threads than the
// caller's CPUs change whether one is avoided. A worker whose mask the application set is left
// alone, and so is every worker of a caller the application narrowed to fewer CPUs than the
// process started with. Throws only InvalidArgument for a bad TANDEM_OPENMP_PLACEMENT; call it
// before changing anything an exception would leave behind.
void keep_team_off_caller_cpu(int threads);

// After regions the ops do not size (OpenBLAS's, a parallel_for of fewer threads): the calling
// thread's pool may have lost workers and gain new ones, so the next team of two or more is placed
// again.
void forget_team_placement();

// "each op's team threads kept off the calling thread's CPU", or "off (why)".
std::string placement_description();

}  // namespace tandem::openmp
