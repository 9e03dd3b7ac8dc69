#pragma once
// HealthChecks: the agent's health checks over its life (docs/node-health.md): one run
// before each join, with the node's environment and what the agent knows of the round it
// is about to ask for; what the built-in check could not look at is said once per agent.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "agent/health/health_check.h"
#include "agent/process/orphan_guard.h"
#include "common/env_map.h"
#include "common/event_loop.h"

namespace ddprun {

/// What a check is told of the node and the round (DDPRUN_HEALTH_CHECK_ROUND, ...).
struct HealthCheckRound {
  int64_t round = 0;  // the round about to be asked for
  int restart_count = 0;
  std::string run_id;
  int local_world_size = 1;
  std::string host;
};

class HealthChecks {
 public:
  /// `executable`: the ddprun whose health-check mode runs the checks; by default this one.
  HealthChecks(EventLoop& loop, OrphanGuard& guard, const HealthCheckSettings& settings,
               std::string executable = ThisExecutable())
      : loop_(loop), guard_(guard), settings_(settings), executable_(std::move(executable)) {}

  /// This program's path (/proc/self/exe).
  static std::string ThisExecutable();

  /// Starts a run (one at a time: a run still going is killed); `done` gets why the node is
  /// unhealthy, "" when it is not.
  void Run(const EnvMap& node_env, const HealthCheckRound& round, HealthCheckRun::Done done);
  /// True when `pid` was the check's (the agent reaps every child).
  bool OnProcessExited(pid_t pid, int wait_status) {
    return run_ && run_->OnProcessExited(pid, wait_status);
  }

 private:
  EventLoop& loop_;
  OrphanGuard& guard_;
  const HealthCheckSettings& settings_;
  const std::string executable_;
  std::unique_ptr<HealthCheckRun> run_;
  bool said_skipped_ = false;
};

}  // namespace ddprun
