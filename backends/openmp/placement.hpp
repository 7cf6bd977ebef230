// Where the openmp backend's team threads run: off the CPU of the thread that calls the op.
//
// After a pause (50 ms or more), Linux woke a sleeping OpenMP worker onto the CPU of the thread
// that woke it, the op's calling thread, though the worker's own CPU was idle; the calling thread
// then spun at the region's barrier (libgomp's default wait) while the worker waited behind it for
// that CPU. On a 2-vCPU Zen 4 EPYC an empty parallel region after a 0.25 s pause took 5.8 ms, and
// so did a sum of 64K or 1M floats (0.03 ms back to back), PyTorch's the same; with the threads
// bound to cores (OMP_PROC_BIND) the region took 0.08 ms. So each worker is kept off the calling
// thread's CPU: its affinity is the caller's set less the CPU the caller runs on, set by the
// worker itself, and set again when the caller is found on another CPU. The calling thread's own
// affinity is never changed. Off where the user binds the threads (OMP_PROC_BIND, OMP_PLACES) or
// sets TANDEM_OPENMP_PLACEMENT=off.
#pragma once

#include <string>

namespace tandem::openmp {

// Keeps the workers of the calling thread's team of `threads` off the CPU it runs on now: nothing
// when they already are (a look at the CPU, tens of nanoseconds), else one parallel region in
// which each worker sets its affinity (about 0.1 ms after a pause, once per move of the caller).
// Call outside any parallel region.
void keep_team_off_caller_cpu(int threads);

// "each op's team off the calling thread's CPU", or why not.
std::string placement_description();

}  // namespace tandem::openmp
