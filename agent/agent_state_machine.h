#pragma once
// AgentStateMachine: the rules of one node's agent, beside the master's RoundStateMachine and
// built the same way. Pure: no processes, no sockets, no clock of its own. The agent's shell
// (ElasticAgent) feeds it what happened, with monotonic time, runs the actions it emits in
// order, and calls Tick at NextDeadline(); tests drive it with a fake clock.
//
//   joining --(assigned)--> running --(a worker failed: report, stop the rest)--+
//      ^                       |  \--(all succeeded: report)--> finishing       |
//      |                       |                                    |           |
//      +---(stop order, once the workers have exited) <--------------+-----------+
//   any --(run ended, refused, signal, join timeout; once the workers have exited)--> done
//
// While workers run, an order that ends the attempt (stop, master lost, refused, run ended,
// signal) stops them first and is carried out when the last one has exited; when several
// arrive, the strongest wins: signal > run ended > refused > master lost > stop order.
//
// A hang (docs/hangs.md) runs inside `running`. Where every rank was is recorded before any
// rank is stopped, so that no hung rank's peer sees it die first:
//
//   hang found --> freeze (SIGSTOP all) --> report the failure, wait for the order (grace)
//        |  in D state: the node is unhealthy --> collect --> stop, leave
//   order with collect_stacks (or any stop while frozen) --> freeze, collect (after the
//        settle between nodes); the stop signal is held
//   stacks taken --> kill the hung, send the held stop
//   the run over, this node's report incomplete --> wait report_wait for the master's
//        merged report, then exit
// Every bound is a HangTimings field (rendezvous/hang_timings.h).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/agent_action.h"
#include "agent/rule_options.h"
#include "agent/run_end.h"
#include "common/timer_table.h"
#include "rendezvous/hang_timings.h"
#include "rendezvous/protocol_words.h"

namespace ddprun {

/// What the rules need to know of the job, fixed for the agent's life.
struct AgentSettings {
  std::string host;  // this node's name, as in failure reports
  int nproc_per_node = 1;
  RuleOptions options;  // as the command line gave them
  // How often the master wants a heartbeat; InfiniteDuration: no master to tell (one node).
  absl::Duration heartbeat_interval = absl::InfiniteDuration();
  // How long a join may wait for a round before this node gives up; InfiniteDuration: forever.
  absl::Duration join_deadline = absl::InfiniteDuration();
  // While it waits for a round (a join_deadline is set), the node says how the wait goes:
  // first this long after its join, then at every `progress_every` (kCheckProgress).
  absl::Duration progress_first = absl::Seconds(5);
  absl::Duration progress_every = absl::Seconds(30);
  // For the message when the join deadline passes.
  absl::Duration join_timeout = absl::Seconds(600);
  std::string master_endpoint;
  bool tls = false;
  // A health check runs before every join (kCheckHealth); the shell answers HealthChecked.
  bool health_check = false;
  // The job has a token: only its own operators can stop it, and such a stop exits 0.
  bool has_token = false;
  HangTimings hangs;
  // This node's agent serves its workers' TCPStore (a multi-node job): each round's store
  // opens with kOpenStoreRound (see StoreMayOpen).
  bool serves_store = false;
  // How long workers run on without a master (--rdzv-conf master_outage_timeout): then they
  // are stopped and the node joins again. InfiniteDuration: the master is never lost.
  absl::Duration master_outage_timeout = absl::InfiniteDuration();
  // After this node's workers all succeeded, how long it asks for a lost master to take that
  // report (the master's keep-alive window, at most master_outage_timeout): then it exits 0
  // without the exit barrier, as torchrun does when its barrier's store is gone.
  absl::Duration finished_master_wait = absl::Seconds(15);
};

/// A worker of this attempt was taken for hung (agent/hangs/hang_watch.h found it).
struct FoundHang {
  int local_rank = 0;
  int pid = 0;
  std::string cause;            // names the rank and what was seen, for the log and summary
  bool node_unhealthy = false;  // in uninterruptible sleep: the node is at fault, not the job
};

/// The state of this attempt's workers, as the shell sees them after anything happened.
struct WorkersView {
  bool any_failed = false;  // a worker failed on its own (not one the agent stopped)
  bool all_exited = false;
};

/// What the shell found when it closed an attempt whose workers have all exited.
struct AttemptResult {
  bool succeeded = false;
  // The attempt's root cause on this node, when a worker failed.
  using RootCause = NodeRootCause;
  std::optional<RootCause> root_cause;
  // This node sent the rendezvous its stacks of a hang, and its own report lacks other
  // nodes' ranks: the master's merged report is awaited (HangReportArrived).
  bool awaits_hang_report = false;
};

class AgentStateMachine {
 public:
  // kChecking: the health check runs before a join. kCoolingDown: the rendezvous keeps this
  // node out until the cooldown ends; it joins again then. kExiting: the run is over here;
  // only the master's hang report is awaited (HangTimings::report_wait) before kDone.
  enum class Phase {
    kIdle,
    kChecking,
    kJoining,
    kRunning,
    kFinishing,
    kCoolingDown,
    kExiting,
    kDone
  };

  AgentStateMachine(AgentSettings settings, absl::Time now);

  /// Joins the first round.
  void Start(absl::Time now);
  /// The rendezvous assigned this node a round (ignored unless joining).
  void Assigned(const Assignment& assignment, absl::Time now);
  /// The round ended for every node: stop, then join the next one, or run `next` when the
  /// rendezvous sent it with the order (a restart in place; the latest order wins).
  /// `collect_stacks`: a rank hung; record where the workers are first.
  void StopOrdered(StopReason reason, const std::string& detail, bool collect_stacks,
                   const std::optional<Assignment>& next, absl::Time now);
  /// The run is over (`root_cause`: the earliest failure anywhere, when it failed).
  void RunEnded(const RunEnd& end, bool collect_stacks, absl::Time now);
  /// The master is out of reach. While this node is in a round the master has not ended,
  /// its workers go on: it reconnects and asks for its place back (kJoin with `resume`),
  /// and checks that group rank 0's store still answers (kCheckReach). Otherwise: stop,
  /// reconnect, rejoin.
  void MasterLost(const std::string& detail, absl::Time now);
  /// A master gave this node its place back in `round` (the answer to a resume).
  void Resumed(int64_t round, absl::Time now);
  /// The shell ran kCheckReach: whether the host of group rank 0's store (group rank 1's,
  /// on group rank 0) answered, and if not, why. A node that cannot reach it either is cut
  /// off from the job: it stops its workers.
  void JobReach(bool reachable, const std::string& detail, absl::Time now);
  /// The rendezvous refused this node; trying again will not change that.
  void Refused(const std::string& detail, absl::Time now);
  /// The shell ran kCheckProgress: `text` says how the wait for a round goes, from the
  /// master (`master_answered`) or from what answers at its address when it does not.
  void Progress(const std::string& text, bool master_answered, absl::Time now);
  /// The rendezvous keeps this node out for `cooldown` (InfiniteDuration: for the rest of
  /// the job): stop, then wait and join again, or leave (exit 69).
  void Excluded(const std::string& detail, absl::Duration cooldown, absl::Time now);
  /// The shell ran kCheckHealth: `failure` says why the node is unhealthy; empty: healthy.
  void HealthChecked(const std::string& failure, absl::Time now);
  /// A terminating signal reached the agent (not SIGCHLD).
  void Signal(int signal, absl::Time now);
  /// Something happened to this attempt's workers (an exit, a start that failed).
  void WorkersChanged(const WorkersView& view, absl::Time now);
  /// A worker was taken for hung; only the attempt's first hang counts.
  void HangFound(const FoundHang& hang, absl::Time now);
  /// The shell ran kCollectStacks and every dump is in, or its time (dump_bound) is up.
  void StacksTaken();
  /// The master's merged hang report for `round` came (and was written).
  void HangReportArrived(int64_t round);
  /// The shell ran kCloseAttempt.
  void AttemptClosed(const AttemptResult& result, absl::Time now);
  /// The shell cannot go on (it has logged why and killed what it started): exit.
  void Fatal(int exit_code);
  /// The rendezvous says every node's workers of the rounds before `round` have exited: a
  /// round run in place may open its store (until then, new connections wait, so that no
  /// worker of the last round meets one of the new).
  void StoreMayOpen(int64_t round);
  /// Applies every deadline that has passed by `now`.
  void Tick(absl::Time now);

  /// Actions emitted since the last call, in the order they must run.
  std::vector<AgentAction> TakeActions();
  /// When Tick must next be called (InfiniteFuture when nothing is pending).
  absl::Time NextDeadline() const;

  Phase phase() const { return phase_; }
  const AgentSettings& settings() const { return settings_; }
  /// What the agent exits with, once done() (kExit carries it too).
  int exit_code() const { return exit_code_; }
  bool done() const { return phase_ == Phase::kDone; }
  /// The current attempt's assignment, or the last one this node ran.
  const std::optional<Assignment>& assignment() const { return assignment_; }
  /// This node left the run while others may still run (the exit barrier timed out, or it
  /// left as unhealthy or excluded): a master it hosts must serve on until they end.
  bool others_still_run() const { return others_still_run_; }
  /// How the run ended, once the rendezvous said so.
  const std::optional<RunEnd>& run_end() const { return run_end_; }
  /// The first terminating signal the agent received; 0: none.
  int interrupted_by() const { return interrupted_by_; }

 private:
  // What to do once the running attempt's workers have exited; stronger values win.
  // kRunNext: run next_round_, sent with the stop order, without a join.
  enum class AfterStop {
    kNothing,
    kRejoin,
    kRunNext,
    kReconnect,
    kExcluded,
    kLeave,
    kUnhealthy,
    kEnd
  };

  void JoinNextRound(absl::Time now);
  // Without a master, workers running: reconnect and ask for the place back.
  void Resume(absl::Time now);
  // The master (or its absence for master_outage_timeout) answered: the outage is over.
  void OutageOver();
  // While the master is lost and workers run: asks whether group rank 0's store answers
  // (kCheckReach), unless it is this node's own; again every heartbeat_interval.
  void CheckReach(absl::Time now);
  // What CheckReach looks at: group rank 0's store, or for group rank 0, group rank 1's.
  std::string ReachTarget() const;
  // The master is lost and this node cannot go on without it: its workers stop, it ends
  // its store's round, reconnects and joins again.
  void StopForRejoin(absl::Time now);
  void RunRound(const Assignment& assignment, bool in_place, absl::Time now);
  void SendJoin(const std::string& failed_check, absl::Time now);
  void CoolDown(absl::Time now);
  void StopThen(AfterStop next, absl::Time now);
  void Carry(AfterStop next, absl::Time now);
  void BeginStop(int signal, absl::Time now);
  void ExitAtRunEnd();
  void Exit(int exit_code);
  void Kill(std::string why, absl::Time now);
  void CollectStacksIfRunning(bool collect_stacks);
  void Freeze();
  void CollectStacks();
  void FinishExit();
  // This node's workers all succeeded: its work is done, it never runs them again.
  bool WorkDone() const { return phase_ == Phase::kFinishing && succeeded_; }
  // A master lost after WorkDone: say how the wait goes; exit 0 once it is over.
  void WaitForMasterWithWorkDone(const std::string& detail, absl::Time now);
  // No master answered by the outage deadline: exit 0 with the work done, else stop and rejoin.
  void NoMasterInTime(absl::Time now);
  // The run is over for this node (kExiting or kDone): events other than the hang report's
  // change nothing.
  bool over() const { return phase_ == Phase::kExiting || phase_ == Phase::kDone; }
  void Log(LogLevel level, std::string text);
  AgentAction& Emit(AgentAction::Kind kind);  // valid until the next Emit
  // A kMoment action: `kind` at `now`, for the observers (agent/moments.h).
  AgentMoment& Announce(AgentMoment::Kind kind, absl::Time now);
  void EmitWithSignal(AgentAction::Kind kind, int signal);
  void EmitForRound(AgentAction::Kind kind);
  std::string JoinTimeoutMessage() const;

  // Every deadline of the rules, in the order a Tick serves those that passed (OnTimer).
  enum class Timer {
    kGrace,      // SIGKILL what still runs
    kKill,       // what SIGKILL did not end is abandoned
    kJoin,       // give up waiting for a round
    kProgress,   // say how the wait for a round goes (or the wait for a master, work done)
    kCooldown,   // join again after an exclusion
    kReport,     // give up waiting for the master's hang report
    kOutage,     // master_outage_timeout (or finished_master_wait): stop the workers, or exit 0
    kReach,      // check group rank 0's store again
    kResume,     // ask for the place back again
    kHeartbeat,  // tell the master this node lives
    kCount,
  };
  // What `timer`, which has passed, does; false when the agent exits and the Tick ends.
  bool OnTimer(Timer timer, absl::Time now);

  const AgentSettings settings_;
  TimerTable<Timer> timers_;
  Phase phase_ = Phase::kIdle;
  std::optional<Assignment> assignment_;  // the current attempt's, or the last one run
  bool stopping_ = false;                 // this attempt's workers were told to stop
  bool failure_reported_ = false;         // this attempt's failure went to the rendezvous
  bool failure_seen_ = false;             // a worker of this attempt failed (kFailureSeen)
  bool succeeded_ = false;                // every worker of this attempt exited 0
  bool closing_ = false;                  // kCloseAttempt emitted, AttemptClosed not yet back
  // Where this attempt's stack collection stands: the workers are frozen (a hang here, or
  // an order to collect), being collected (kCollectStacks out), or their stacks are taken.
  enum class Stacks { kNone, kFrozen, kCollecting, kTaken };
  Stacks stacks_ = Stacks::kNone;
  int held_stop_ = 0;  // a stop signal that waits for the stacks (kCollecting)
  AfterStop after_stop_ = AfterStop::kNothing;
  std::optional<Assignment> next_round_;  // after_stop_ == kRunNext
  std::optional<RunEnd> run_end_;         // as the rendezvous said it
  int interrupted_by_ = 0;                // the first terminating signal, 0 if none
  std::optional<AttemptResult::RootCause> last_root_cause_;  // of the last failed attempt
  bool others_still_run_ = false;
  std::string unhealthy_;                     // why this node is unhealthy; empty: it is not
  absl::Time joined_at_;                      // when this node last asked for a round
  int64_t store_may_open_ = -1;               // the last round StoreMayOpen allowed
  std::optional<Assignment> store_held_;      // a round run in place, its store not open
  int64_t awaited_report_ = -1;               // the round whose hang report is awaited
  std::optional<absl::Time> master_lost_at_;  // the outage of the master, since when
  static constexpr absl::Duration kResumeRetry = absl::Seconds(1);
  int exit_code_ = 0;  // kExiting: what kExit will carry
  absl::Duration cooldown_ = absl::ZeroDuration();
  std::vector<AgentAction> actions_;
};

}  // namespace ddprun
