#pragma once
// Where a worker's files go: <log_dir>/<run_id>/attempt_<round>/<local_rank>/{stdout,stderr}.log
// and error.json. Attempts are numbered by round, so a restart never overwrites the logs of
// the attempt that failed (torchrun rmtree's its attempt folder on every restart).

#include <map>
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

/// Where a tee'd line comes from, for its prefix.
struct LineSource {
  std::string role_name;
  int rank = 0;
  int local_rank = 0;
  std::string hostname;  // gethostname(), as torchrun's ${hostname}: not the FQDN
};

/// The prefix put before each tee'd line: --log-line-prefix-template with ${role_name},
/// ${rank}, ${local_rank} and ${hostname} filled in, or torchrun's "[<role><local_rank>]:".
std::string LinePrefix(const std::string& prefix_template, const LineSource& source);

/// Python's string.Template(text).safe_substitute(values), which torchrun applies to the
/// template: $name and ${name} are replaced when `values` has the name (case-sensitive),
/// left as they are otherwise; $$ is a $; any other $ stays.
std::string SafeSubstitute(const std::string& text,
                           const std::map<std::string, std::string>& values);

}  // namespace ddprun
