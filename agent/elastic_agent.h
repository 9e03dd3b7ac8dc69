#pragma once
// The agent's main loop: join a round, start this node's workers, watch them, report to the
// rendezvous, and follow its orders (stop and rejoin, or end). One thread, one event loop:
// signals, worker exits, worker output, timers and rendezvous events all arrive as fds.
//
//   joining --(assigned)--> running --(a worker failed: report, stop the rest)--+
//      ^                       |  \--(all succeeded: report)--> finishing       |
//      |                       |                                    |           |
//      +---(stop order, once the workers have exited) <--------------+-----------+
//   any --(run ended, once the workers have exited)--> done (exit status)

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/agent_config.h"
#include "agent/event_loop.h"
#include "agent/failure_summary.h"
#include "agent/orphan_guard.h"
#include "agent/store_address.h"
#include "agent/tcp_store_server.h"
#include "agent/worker_env.h"
#include "agent/worker_supervisor.h"
#include "rendezvous/rendezvous_connection.h"

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
  /// `store`: multi-node jobs only (one-node jobs' rank 0 hosts the TCPStore itself).
  ElasticAgent(const AgentConfig& config, EnvMap base_env, RendezvousConnection& rendezvous,
               OrphanGuard& guard, std::optional<WorkerStore> store = std::nullopt);
  ~ElasticAgent();

  /// Runs the job to its end and returns the exit status for the ddprun process.
  int Run();
  /// This node left the run while others still ran (the exit barrier timed out).
  bool others_still_run() const { return others_still_run_; }

 private:
  enum class State { kJoining, kRunning, kFinishing, kDone };

  absl::Status SetUp();
  void JoinNextRound();
  void StartAttempt(const Assignment& assignment);
  void OnSignals();
  void ReapChildren();
  void OnRendezvousEvents();
  void OnMasterLost(const absl::Status& status);
  void OnJoinTimeout();
  void OnWorkersChanged();
  void EndAttempt();
  // The round is over for every node: the workers' store closes its connections.
  void EndStoreRound();
  // Where the workers of the last attempt met, for the summaries.
  MeetingPoint Meeting() const;
  // GLOO_SOCKET_IFNAME for this round's workers ("": none); see WorkerStore.
  std::string GlooInterface(const std::string& master_addr);
  void AfterAttempt();
  void BeginStop(int signal);
  void Finish(int exit_code);
  void FinishRun(const RendezvousEvent& end);
  void CleanUpLogRoot();
  int FirstFreeAttempt() const;
  std::vector<ReportedFailure> ForMaster(const std::vector<WorkerFailure>& failures) const;

  const AgentConfig& config_;
  EnvMap base_env_;
  RendezvousConnection& rendezvous_;
  OrphanGuard& guard_;
  const std::optional<WorkerStore> store_;
  std::string host_;
  std::string incarnation_;
  std::string log_root_;
  bool log_root_is_temporary_ = false;
  int attempt_offset_ = 0;  // attempts of earlier runs with the same id and --log-dir
  int last_log_attempt_ = -1;  // attempt_<n> folders only go up, even if a new master restarts rounds
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<SignalChannel> signals_;
  std::unique_ptr<OneShotTimer> grace_timer_;
  std::unique_ptr<OneShotTimer> heartbeat_timer_;  // re-armed every heartbeat_interval
  std::unique_ptr<OneShotTimer> join_timer_;       // armed while waiting for a round

  State state_ = State::kJoining;
  int exit_code_ = 0;
  int interrupted_by_ = 0;          // the first terminating signal received, 0 if none
  std::unique_ptr<WorkerSupervisor> workers_;  // the current attempt; null between attempts
  Assignment assignment_;           // of the current attempt
  bool assigned_once_ = false;
  bool others_still_run_ = false;      // assignment_ holds a round this agent ran
  bool failure_reported_ = false;   // this attempt's failure went to the rendezvous
  bool rejoin_after_attempt_ = false;            // a stop order arrived
  bool reconnect_after_attempt_ = false;         // the master was lost: reconnect, rejoin
  std::optional<RendezvousEvent> end_after_attempt_;  // the run ended
  std::vector<WorkerFailure> last_failures_;     // of the last attempt that had any
  std::string gloo_said_;  // the GLOO_SOCKET_IFNAME last logged ("?": the warning that none)
};

}  // namespace ddprun
