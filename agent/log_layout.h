#pragma once
// Where a worker's files go: <log_dir>/<run_id>/attempt_<round>/<local_rank>/{stdout,stderr}.log
// and error.json. Attempts are numbered by round, so a restart never overwrites the logs of
// the attempt that failed (torchrun rmtree's its attempt folder on every restart).

#include <string>

namespace ddprun {

struct WorkerLogPaths {
  std::string dir;
  std::string stdout_log;
  std::string stderr_log;
  std::string error_file;
};

std::string RunLogDir(const std::string& log_dir, const std::string& run_id);
std::string AttemptLogDir(const std::string& log_dir, const std::string& run_id, int attempt);
WorkerLogPaths WorkerLogPathsFor(const std::string& log_dir, const std::string& run_id, int attempt,
                                 int local_rank);

/// The prefix put before each tee'd line: TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE with
/// ${role_name}, ${rank} and ${local_rank} filled in, or torchrun's "[<role><local_rank>]:".
std::string LinePrefix(const std::string& prefix_template, const std::string& role_name, int rank,
                       int local_rank);

}  // namespace ddprun
