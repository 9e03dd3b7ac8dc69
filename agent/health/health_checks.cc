#include "agent/health/health_checks.h"

#include <unistd.h>

#include <utility>

#include "spdlog/spdlog.h"

namespace ddprun {

std::string HealthChecks::ThisExecutable() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : "/proc/self/exe";
}

void HealthChecks::Run(const EnvMap& node_env, const HealthCheckRound& round,
                       HealthCheckRun::Done done) {
  EnvMap env = node_env;
  env["DDPRUN_HEALTH_CHECK_ROUND"] = std::to_string(round.round);
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(round.restart_count);
  env["TORCHELASTIC_RUN_ID"] = round.run_id;
  env["LOCAL_WORLD_SIZE"] = std::to_string(round.local_world_size);
  env["DDPRUN_NODE_HOST"] = round.host;
  run_ =
      std::make_unique<HealthCheckRun>(loop_, guard_, settings_, executable_, FlattenEnv(env),
                                       [this, done = std::move(done)](const std::string& failure) {
                                         if (!said_skipped_ && !run_->skipped().empty()) {
                                           said_skipped_ = true;
                                           for (const std::string& line : run_->skipped()) {
                                             spdlog::warn("health check: skipped: {}", line);
                                           }
                                         }
                                         done(failure);
                                       });
  run_->Start();
}

}  // namespace ddprun
