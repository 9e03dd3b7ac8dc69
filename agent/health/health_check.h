#pragma once
// The checks an agent runs on its node before it joins each round (docs/node-health.md).
// Everything runs in one child process, `ddprun` itself in its health-check mode
// (health_check_process.h): the built-in check (GPUs, NVML, free disk), then the user's
// command (--health-check) with /bin/sh -c. The driver libraries are loaded there, never in
// the agent, and the agent's loop goes on (heartbeats, signals) while the check runs; it is
// killed, with its process group, at --health-check-timeout.

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "agent/process/orphan_guard.h"
#include "common/event_loop.h"
#include "common/unique_fd.h"

namespace ddprun {

struct HealthCheckSettings {
  std::string command;    // run with /bin/sh -c; empty: none
  bool builtin = false;   // the built-in check
  int expected_gpus = 0;  // built-in: the GPUs counted at start (--nproc-per-node=gpu); 0: none
  int64_t min_free_disk_bytes = 0;  // built-in: free space wanted in `disk_path`; 0: no check
  std::string disk_path;            // the log dir
  absl::Duration timeout = absl::Seconds(60);
  bool any() const { return builtin || !command.empty(); }
};

/// How much of a failing check's output goes to the master and the summaries.
inline constexpr int kHealthCheckTailLines = 20;
inline constexpr size_t kHealthCheckTailBytes = 4096;

/// One run of the node's checks. Done(failure) runs once on the loop: failure empty when
/// the node is healthy, else why it is not, with the output's last lines.
class HealthCheckRun {
 public:
  using Done = std::function<void(const std::string& failure)>;
  /// `executable`: this ddprun (for its health-check mode); `env`: "KEY=VALUE" for the check.
  HealthCheckRun(EventLoop& loop, OrphanGuard& guard, const HealthCheckSettings& settings,
                 std::string executable, std::vector<std::string> env, Done done);
  ~HealthCheckRun();  // a check still running is killed with its process group
  HealthCheckRun(const HealthCheckRun&) = delete;
  HealthCheckRun& operator=(const HealthCheckRun&) = delete;

  /// Starts the check; a check that cannot start reports its failure through Done.
  void Start();
  /// True when `pid` was the check (the agent reaps every child).
  bool OnProcessExited(pid_t pid, int wait_status);
  /// Lines the built-in check printed about what it skipped (no NVML, ...).
  const std::vector<std::string>& skipped() const { return skipped_; }

 private:
  void OnTimeout();
  void Finish(const std::string& failure);

  EventLoop& loop_;
  OrphanGuard& guard_;
  const HealthCheckSettings& settings_;
  const std::string executable_;
  const std::vector<std::string> env_;
  Done done_;
  pid_t pid_ = -1;
  UniqueFd output_;  // memfd: the child's stdout and stderr
  std::unique_ptr<OneShotTimer> timer_;
  bool timed_out_ = false;
  bool finished_ = false;
  std::vector<std::string> skipped_;
};

/// The argv of ddprun's health-check mode for `settings` (health_check_process.h parses it).
std::vector<std::string> HealthCheckArgv(const std::string& executable,
                                         const HealthCheckSettings& settings);

/// The last `kHealthCheckTailLines` lines of `output` (at most kHealthCheckTailBytes), without
/// the lines about skipped checks, which go to `skipped`.
std::string HealthCheckTail(const std::string& output, std::vector<std::string>* skipped);

}  // namespace ddprun
