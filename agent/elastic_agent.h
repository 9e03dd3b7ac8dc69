#pragma once
// The agent: the shell around AgentStateMachine (agent_state_machine.h), which holds every
// rule. One thread, one event loop: signals, worker exits, worker output, the rules' next
// deadline and rendezvous events all arrive as fds; each is fed to the rules, and the shell
// runs the actions they emit (join, start and stop workers, report, exit). It decides
// nothing itself. Each moment of the node's lifecycle is announced once (agent/moments.h);
// what is written and counted on the way is its observers' (ElasticRecords, WorkerMetrics,
// RestartTimeline, and the shell's own restart line and round-table reports).

#include <signal.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "agent/agent_children.h"
#include "agent/agent_config.h"
#include "agent/agent_state_machine.h"
#include "agent/elastic_records.h"
#include "agent/failure_summary.h"
#include "agent/gloo_interface.h"
#include "agent/hang_report_files.h"
#include "agent/hangs/hang_checks.h"
#include "agent/join_request.h"
#include "agent/logs/log_root.h"
#include "agent/moments.h"
#include "agent/process/orphan_guard.h"
#include "agent/restart_timeline.h"
#include "agent/worker_metrics.h"
#include "agent/worker_store.h"
#include "common/env_map.h"
#include "common/event_loop.h"
#include "observability/agent_metrics.h"
#include "rendezvous/rendezvous_connection.h"
#include "store/store_token_file.h"

namespace ddprun {

class ElasticAgent : private MomentObserver {
 public:
  /// `guard` must have been started before any thread; `base_env` is what workers inherit.
  /// `store`: the TCPStore the agent serves its workers: multi-node jobs, and one-node jobs
  /// given an --rdzv-endpoint; none: rank 0's worker hosts it.
  ElasticAgent(const AgentConfig& config, EnvMap base_env, RendezvousConnection& rendezvous,
               OrphanGuard& guard, std::optional<WorkerStore> store = std::nullopt);
  ~ElasticAgent() override;

  /// Runs the job to its end and returns the exit status for the ddprun process.
  int Run();
  /// Publishes what its workers do to `board` from now on (--metrics-port).
  void PublishMetricsTo(AgentMetricsBoard* board) {
    seen_.metrics.PublishTo(board);
    PublishMetrics();  // its run id and no worker, until the first round
  }
  /// This node left the run while others still ran (the exit barrier timed out).
  bool others_still_run() const { return rules_.others_still_run(); }

 private:
  // The event loop, the signals it watches, the timer armed for the rules' deadline, and
  // the workers' Store token (the rendezvous token, or a random one for the store rank 0
  // serves in a one-node job; none in a multi-node job without a token).
  struct Inputs {
    std::unique_ptr<EventLoop> loop;
    std::unique_ptr<SignalChannel> signals;
    std::unique_ptr<OneShotTimer> deadline;
    std::optional<StoreTokenFile> store_token;
  };
  // What writes and counts the node's moments; each subscribes to moments_, none decides.
  struct Observers {
    std::optional<ElasticRecords> records;  // --event-log-handler (made in ApplyChoices)
    WorkerMetrics metrics;                  // --metrics-port
    RestartTimeline restarts;               // announces each restart's split to moments_
    HangReportFiles hang_files;             // the hang reports and stacks, in the log folder
    void SubscribeTo(Moments& moments) {
      moments.Subscribe(*records);
      moments.Subscribe(metrics);
      moments.Subscribe(restarts);
      moments.Subscribe(hang_files);
    }
  };
  // What the user chose (the log folder, the event log, hang checks): exit 2 if refused.
  absl::Status ApplyChoices();
  // --preload: the warm pool's interpreter starts importing now, while the node joins.
  void StartWarmPool();
  // The loop, signals, timer, the workers' store token: exit 70 if they cannot be had.
  absl::Status OpenInputs();
  // Inputs: each is fed to the rules, whose actions then run.
  void OnSignals();
  void OnRendezvousEvent(RendezvousEvent& event);
  void OnHangReport(const RendezvousEvent& event);
  void OnDeadline();
  void ReportWorkers();
  void FeedWorkers();  // without running the actions: for use inside an action
  void OnStoreMarks();
  // The shell's own part of a moment: a restart's line, and the run's round table (a
  // restart's split, a master's outage) sent to the rendezvous.
  void See(const AgentMoment& moment) override;

  // Actions.
  void RunActions();
  void RunAction(const AgentAction& action);
  void CheckHealth();
  void Join(const std::optional<Assignment>& last, const std::string& failed_check, bool resume);
  void StartAttempt(const Assignment& assignment);
  // The attempt's workers are running (or failed to start): records, metrics, the log line.
  void WorkersStarted(const Assignment& assignment);
  void OnWarmPoolSettled();
  AttemptResult CloseAttempt();
  // Writes this node's hang report and sends its stacks; true when the report lacks other
  // nodes' ranks, so that the master's merged one is awaited.
  bool ReportStacks(std::vector<RankStack> stacks);
  void KillWorkersNow();
  void AbandonWorkers(const std::string& why);
  void PublishMetrics();
  void WriteFailureSummary();
  void WriteStopSummary(int signal);
  // `kill -USR2 <agent>`: every worker's stack, written to the attempt's folder, without
  // stopping the job (unless --signals-to-handle forwards SIGUSR2: then that wins).
  static constexpr int kStackSignal = SIGUSR2;
  const std::optional<WorkerStore>& store() const { return node_.store; }
  bool ForwardsStackSignal() const {
    return absl::c_linear_search(config_.signals_to_handle, kStackSignal);
  }
  void TakeStacksOnRequest();

  const AgentConfig& config_;
  EnvMap base_env_;  // what workers inherit, with what the hang checks add
  RendezvousConnection& rendezvous_;
  OrphanGuard& guard_;
  const JoiningNode node_;  // this node as it joins: its name, incarnation and store
  AgentStateMachine rules_;
  LogRoot log_root_;
  Inputs inputs_;
  std::optional<HangChecks> hang_checks_;     // made in ApplyChoices
  AgentChildren children_;                    // the workers, health checks and warm pool
  std::vector<WorkerFailure> last_failures_;  // of the last attempt that had any
  Moments moments_;
  Observers seen_;
  GlooInterfaceChoice gloo_;
};

}  // namespace ddprun
