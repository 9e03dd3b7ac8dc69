#include "agent/log_layout.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace ddprun {

std::string RunLogDir(const std::string& log_dir, const std::string& run_id) {
  return absl::StrCat(log_dir, "/", run_id);
}

std::string AttemptLogDir(const std::string& log_dir, const std::string& run_id, int attempt) {
  return absl::StrCat(RunLogDir(log_dir, run_id), "/attempt_", attempt);
}

WorkerLogPaths WorkerLogPathsFor(const std::string& log_dir, const std::string& run_id, int attempt,
                                 int local_rank) {
  WorkerLogPaths paths;
  paths.dir = absl::StrCat(AttemptLogDir(log_dir, run_id, attempt), "/", local_rank);
  paths.stdout_log = paths.dir + "/stdout.log";
  paths.stderr_log = paths.dir + "/stderr.log";
  paths.error_file = paths.dir + "/error.json";
  return paths;
}

std::string LinePrefix(const std::string& prefix_template, const std::string& role_name, int rank,
                       int local_rank) {
  if (prefix_template.empty()) return absl::StrCat("[", role_name, local_rank, "]:");
  return absl::StrReplaceAll(prefix_template, {{"${role_name}", role_name},
                                               {"${rank}", absl::StrCat(rank)},
                                               {"${local_rank}", absl::StrCat(local_rank)}});
}

}  // namespace ddprun
