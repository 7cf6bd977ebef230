#pragma once

#include <string>
#include <vector>

namespace tandem::cli {

// Each subcommand takes its arguments (after the subcommand name) and returns the exit code:
// 0 success, 1 a check failed, 2 bad usage or an unusable backend.
int info_main(const std::vector<std::string>& args);
int check_main(const std::vector<std::string>& args);
int train_main(const std::vector<std::string>& args);
// After an error in `train --distributed` on several ranks: ends every rank of the job (the
// others may wait in a collective for this one); does nothing otherwise.
void end_distributed_job(int code);
int regress_main(const std::vector<std::string>& args);
int bench_main(const std::vector<std::string>& args);
int compare_main(const std::vector<std::string>& args);
int bench_bandwidth_main(const std::vector<std::string>& args);
int bench_memory_main(const std::vector<std::string>& args);

}  // namespace tandem::cli
