// ElasticAgent's part in node health (docs/node-health.md): the checks it runs before each
// join, and what it says of the nodes the run kept out.

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "agent/elastic_agent.h"
#include "agent/process/worker_process.h"
#include "common/clock.h"
#include "common/small_file.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

std::string ThisExecutable() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : "/proc/self/exe";
}

}  // namespace

void ElasticAgent::StartHealthCheck() {
  // The node's environment, and what the agent knows of the round it is about to ask for.
  EnvMap env = base_env_;
  const std::optional<Assignment>& last = rules_.assignment();
  env["DDPRUN_HEALTH_CHECK_ROUND"] = std::to_string(last ? last->round + 1 : 0);
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(last ? last->restart_count : 0);
  env["TORCHELASTIC_RUN_ID"] = config_.run_id;
  env["LOCAL_WORLD_SIZE"] = std::to_string(config_.nproc_per_node);
  env["DDPRUN_NODE_HOST"] = host_;
  health_check_ = std::make_unique<HealthCheckRun>(
      *loop_, guard_, config_.health_check, ThisExecutable(), FlattenEnv(env),
      [this](const std::string& failure) { OnHealthChecked(failure); });
  health_check_->Start();
}

void ElasticAgent::OnHealthChecked(const std::string& failure) {
  if (!said_skipped_checks_ && !health_check_->skipped().empty()) {
    said_skipped_checks_ = true;
    for (const std::string& line : health_check_->skipped()) {
      spdlog::warn("health check: skipped: {}", line);
    }
  }
  rules_.HealthChecked(failure, MonotonicNow());
  RunActions();
}

void ElasticAgent::WriteExclusions(const std::vector<std::string>& excluded) {
  if (excluded.empty()) return;
  std::string text =
      absl::StrCat("ddprun: the job kept ", excluded.size(),
                   excluded.size() == 1 ? " node" : " nodes", " out (docs/node-health.md):\n");
  for (const std::string& line : excluded) {
    absl::StrAppend(&text, "  ", absl::StrReplaceAll(line, {{"\n", "\n    "}}), "\n");
  }
  (void)WriteAll(STDERR_FILENO, text);
}

}  // namespace ddprun
