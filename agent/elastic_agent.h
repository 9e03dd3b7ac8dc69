#pragma once
// The agent: the shell around AgentStateMachine (agent_state_machine.h), which holds every
// rule. One thread, one event loop: signals, worker exits, worker output, the rules' next
// deadline and rendezvous events all arrive as fds; each is fed to the rules, and the shell
// runs the actions they emit (join, start and stop workers, report, exit). It decides
// nothing itself.

#include <signal.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/agent_config.h"
#include "agent/agent_state_machine.h"
#include "agent/elastic_records.h"
#include "agent/failure_summary.h"
#include "agent/hangs/timer_fifo.h"
#include "agent/health/health_check.h"
#include "agent/logs/log_root.h"
#include "agent/process/orphan_guard.h"
#include "agent/worker_env.h"
#include "agent/worker_metrics.h"
#include "agent/worker_supervisor.h"
#include "common/event_loop.h"
#include "common/exit_codes.h"
#include "observability/agent_metrics.h"
#include "rendezvous/rendezvous_connection.h"
#include "store/store_address.h"
#include "store/store_token_file.h"
#include "store/tcp_store_server.h"

namespace ddprun {

/// A multi-node agent's part in its workers' TCPStore (TORCHELASTIC_USE_AGENT_STORE=True):
/// the store it serves, and what it offers for MASTER_ADDR and MASTER_PORT should its node
/// get group rank 0.
struct WorkerStore {
  TcpStoreServer* server = nullptr;  // null: it serves none (static, --node-rank above 0)
  StoreAddressOffer offer;
  int port = 0;
  // This host's name resolves only to loopback here, where gloo would listen, out of the
  // other nodes' reach (torchrun's workers fail so): workers get GLOO_SOCKET_IFNAME, an
  // interface toward the other nodes (ChooseGlooInterface), unless the agent's environment
  // sets it.
  bool pick_gloo_interface = false;
};

class ElasticAgent {
 public:
  /// `guard` must have been started before any thread; `base_env` is what workers inherit.
  /// `store`: the TCPStore the agent serves its workers: multi-node jobs, and one-node jobs
  /// given an --rdzv-endpoint; none: rank 0's worker hosts it.
  ElasticAgent(const AgentConfig& config, EnvMap base_env, RendezvousConnection& rendezvous,
               OrphanGuard& guard, std::optional<WorkerStore> store = std::nullopt);
  ~ElasticAgent();

  /// Runs the job to its end and returns the exit status for the ddprun process.
  int Run();
  /// Publishes what its workers do to `board` from now on (--metrics-port).
  void PublishMetricsTo(AgentMetricsBoard* board) {
    metrics_.PublishTo(board);
    PublishMetrics();  // its run id and no worker, until the first round
  }
  /// This node left the run while others still ran (the exit barrier timed out).
  bool others_still_run() const { return rules_.others_still_run(); }

 private:
  absl::Status SetUp();
  absl::Status WatchInputs();

  // Inputs: each is fed to the rules, whose actions then run.
  void OnSignals();
  void OnRendezvousEvent(RendezvousEvent& event);
  void OnDeadline();
  void ReportWorkers();
  void FeedWorkers();  // without running the actions: for use inside an action
  void ReapChildren();

  // Actions.
  void RunActions();
  void RunAction(const AgentAction& action);
  void Join(const std::optional<Assignment>& last, const std::string& failed_check);
  // Node health (elastic_agent_health.cc).
  void StartHealthCheck();
  void OnHealthChecked(const std::string& failure);
  void WriteExclusions(const std::vector<std::string>& excluded);
  void PublishMetrics();
  void StartAttempt(const Assignment& assignment);
  AttemptResult CloseAttempt();
  void KillWorkersNow();
  // Hangs (elastic_agent_hangs.cc).
  absl::Status SetUpHangChecks();
  // Writes this node's report and sends its stacks; true when the report lacks other
  // nodes' ranks, so that the master's merged one is awaited.
  bool ReportStacks(std::vector<RankStack> stacks);
  void OnHangReport(const RendezvousEvent& event);
  void WriteHangReport(int64_t round, const std::string& text);
  void AbandonWorkers(const std::string& why);
  // `kill -USR2 <agent>`: every worker's stack, written to the attempt's folder, without
  // stopping the job (unless --signals-to-handle forwards SIGUSR2: then that wins).
  static constexpr int kStackSignal = SIGUSR2;
  bool ForwardsStackSignal() const;
  void TakeStacksOnRequest();
  // Writes `text` to `name` in `round`'s attempt folder; its path, or "" (no log files).
  std::string WriteAttemptFile(int64_t round, const std::string& name, const std::string& text);
  void WriteFailureSummary();
  void WriteStopSummary(int signal);

  // The round is over for every node: the workers' store closes its connections.
  void EndStoreRound();
  // Where the workers of the last attempt met, for the summaries.
  MeetingPoint Meeting() const;
  // GLOO_SOCKET_IFNAME for this round's workers ("": none); see WorkerStore.
  std::string GlooInterface(const std::string& master_addr);
  std::vector<ReportedFailure> ForMaster(const std::vector<WorkerFailure>& failures) const;

  const AgentConfig& config_;
  EnvMap base_env_;
  RendezvousConnection& rendezvous_;
  OrphanGuard& guard_;
  const std::optional<WorkerStore> store_;
  const std::string host_;
  const std::string incarnation_;
  AgentStateMachine rules_;
  LogRoot log_root_;
  int setup_exit_code_ = kExitInternal;  // what Run returns when SetUp fails
  // The workers' Store token (the rendezvous token, or a random one for the store rank 0
  // serves in a one-node job); none in a multi-node job without a token.
  std::optional<StoreTokenFile> store_token_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<SignalChannel> signals_;
  std::unique_ptr<OneShotTimer> deadline_timer_;  // armed for rules_.NextDeadline()
  std::unique_ptr<WorkerSupervisor> workers_;     // the current attempt; null between attempts
  std::vector<WorkerFailure> last_failures_;      // of the last attempt that had any
  std::optional<TimerFifo> timer_fifo_;           // TORCHELASTIC_ENABLE_FILE_TIMER=1
  std::unique_ptr<HealthCheckRun> health_check_;  // the last check run before a join
  std::optional<ElasticRecords> records_;         // --event-log-handler (made in SetUp)
  WorkerMetrics metrics_;                         // --metrics-port
  bool said_skipped_checks_ = false;              // what the built-in check skipped, once
  bool python_dumps_ = false;                     // see AttemptPlan::python_dumps
  std::string hang_report_path_;                  // the last hang report written
  int64_t summary_said_round_ = -1;               // the round whose hang summary is on stderr
  std::string gloo_said_;  // the GLOO_SOCKET_IFNAME last logged ("?": the warning that none)
  int exit_code_ = 0;
};

}  // namespace ddprun
