// The tandem command line as a function, so that tests can run it in-process.
#pragma once

namespace tandem::cli {

// Exit codes of every command.
enum Exit : int {
  kOk = 0,
  kFailed = 1,     // a check or an accuracy target failed, or measurements were too noisy to keep
  kUsage = 2,      // bad options, an unknown or unusable backend, a bad TANDEM_* value
  kDataError = 3,  // input data or a model file is malformed, or a file cannot be read or written
  kRunError = 4,   // the device or the run failed (out of memory, a device error, anything unexpected)
};

// Parses argv (argv[0] is the program) and runs the command; returns its exit code.
int run(int argc, const char* const* argv);

// After an error in `train --distributed` on several ranks: ends every rank of the job (the
// others may wait in a collective for this one); does nothing otherwise.
void end_distributed_job(int code);

}  // namespace tandem::cli
