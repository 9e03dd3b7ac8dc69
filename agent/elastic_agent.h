#pragma once
// The agent's main loop: join a round, start this node's workers, watch them, and on a
// failure stop them all and start again while the restart budget lasts.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/agent_config.h"
#include "agent/event_loop.h"
#include "agent/failure_summary.h"
#include "agent/orphan_guard.h"
#include "agent/worker_env.h"
#include "agent/worker_group.h"
#include "rendezvous/rendezvous_handler.h"

namespace ddprun {

class ElasticAgent {
 public:
  /// `guard` must have been started before any thread; `base_env` is what workers inherit.
  ElasticAgent(const AgentConfig& config, EnvMap base_env, RendezvousHandler& rendezvous,
               OrphanGuard& guard);

  /// Runs the job to its end and returns the exit status for the ddprun process.
  int Run();

 private:
  struct AttemptResult {
    enum class Kind { kSucceeded, kFailed, kInterrupted } kind = Kind::kSucceeded;
    int signal = 0;  // kInterrupted: the signal the agent received
    std::vector<WorkerFailure> failures;
  };

  absl::Status SetUp();
  absl::StatusOr<AttemptResult> RunAttempt(const RoundAssignment& round);
  void OnSignals(WorkerSupervisor& workers);
  void ReapChildren(WorkerSupervisor& workers);
  void BeginStop(WorkerSupervisor& workers, int signal);
  int FinishFailed(const std::vector<WorkerFailure>& failures);
  void CleanUpLogRoot();
  int FirstFreeAttempt() const;

  const AgentConfig& config_;
  EnvMap base_env_;
  RendezvousHandler& rendezvous_;
  OrphanGuard& guard_;
  std::string host_;
  std::string log_root_;
  bool log_root_is_temporary_ = false;
  int attempt_offset_ = 0;  // attempts of earlier runs with the same id and --log-dir
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<SignalChannel> signals_;
  std::unique_ptr<OneShotTimer> grace_timer_;
  int interrupted_by_ = 0;  // the first terminating signal received, 0 if none
};

}  // namespace ddprun
