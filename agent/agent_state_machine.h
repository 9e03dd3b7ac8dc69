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

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "rendezvous/round_state_machine.h"

namespace ddprun {

/// What the rules need to know of the job, fixed for the agent's life.
struct AgentSettings {
  std::string host;  // this node's name, as in failure reports
  int nproc_per_node = 1;
  absl::Duration shutdown_timeout = absl::Seconds(30);
  // After SIGKILL: how long workers may take to be gone before this node is unhealthy.
  absl::Duration kill_timeout = absl::Seconds(10);
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
};

/// The state of this attempt's workers, as the shell sees them after anything happened.
struct WorkersView {
  bool any_failed = false;  // a worker failed on its own (not one the agent stopped)
  bool all_exited = false;
  // Why this node is unhealthy (a worker in uninterruptible sleep too long); empty: it is not.
  std::string unhealthy;
  // The failure is a hung worker: the workers wait, stopped where they are, until the
  // rendezvous orders every node to record its stacks and stop (or the grace period ends).
  bool hang = false;
};

/// What the shell found when it closed an attempt whose workers have all exited.
struct AttemptResult {
  bool succeeded = false;
  // The attempt's root cause on this node, when a worker failed.
  struct RootCause {
    int rank = 0;
    int shell_exit_code = 1;  // what a shell would report for it (128+N for signal N)
  };
  std::optional<RootCause> root_cause;
};

enum class LogLevel { kInfo, kWarning, kError };

struct AgentAction {
  enum class Kind {
    kCheckHealth,          // run the node's health checks; answer HealthChecked
    kJoin,                 // ask for the next round; `assignment`: the last one this node ran;
                           // `text`: why its health check failed (it then stays out)
    kReconnect,            // open a new session to the master (a kJoin follows)
    kStartWorkers,         // `assignment`: the round to run; `store_waits`: see below
    kStopWorkers,          // `signal` to every worker still running
    kKillWorkers,          // SIGKILL to every worker still running; `text` says why
    kCollectStacks,        // a rank hung: record where every worker is before stopping them
    kAbandonWorkers,       // SIGKILL did not end them: report them unkillable, `text` says why
    kLeave,                // tell the rendezvous this node leaves for good; `text`: why
    kReportFailure,        // this attempt's failures to the rendezvous, for `round`
    kReportSuccess,        // every worker of `round` exited 0
    kReportStopped,        // a restart in place: every worker of `round` has exited
    kHeartbeat,            // proof of life to the master
    kCheckProgress,        // waiting for a round: find out how it goes; answer Progress
    kEndStoreRound,        // the round is over everywhere: the workers' store closes connections
    kCloseAttempt,         // all workers exited: drain output, kill strays; answer AttemptClosed
    kWriteStopSummary,     // the job was stopped by `signal`: say so on stderr
    kWriteFailureSummary,  // this node's failures of the last failed attempt, on stderr
    kLog,                  // `text` at `level`
    kExit,                 // the agent is done: exit with `exit_code`
  };
  Kind kind = Kind::kLog;
  std::optional<Assignment> assignment;
  // kStartWorkers of a restart in place: the workers' store holds the round's connections
  // until the rendezvous says every node's workers of the last round have exited.
  bool store_waits = false;
  int signal = 0;
  int64_t round = 0;
  int exit_code = 0;
  LogLevel level = LogLevel::kInfo;
  std::string text;
};

class AgentStateMachine {
 public:
  // kChecking: the health check runs before a join. kCoolingDown: the rendezvous keeps this
  // node out until the cooldown ends; it joins again then.
  enum class Phase { kIdle, kChecking, kJoining, kRunning, kFinishing, kCoolingDown, kDone };

  AgentStateMachine(AgentSettings settings, absl::Time now);

  /// Joins the first round.
  void Start(absl::Time now);
  /// The rendezvous assigned this node a round (ignored unless joining).
  void Assigned(const Assignment& assignment);
  /// The round ended for every node: stop, then join the next one, or run `next` when the
  /// rendezvous sent it with the order (a restart in place; the latest order wins).
  /// `collect_stacks`: a rank hung; record where the workers are first.
  void StopOrdered(StopReason reason, const std::string& detail, bool collect_stacks,
                   const std::optional<Assignment>& next, absl::Time now);
  /// The run is over (`root_cause`: the earliest failure anywhere, when it failed).
  void RunEnded(RunOutcome outcome, const std::string& detail,
                const std::vector<ReportedFailure>& root_cause, bool collect_stacks,
                absl::Time now);
  /// The master is out of reach: stop (a round may be over elsewhere), reconnect, rejoin.
  void MasterLost(const std::string& detail, absl::Time now);
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
  /// The shell ran kCloseAttempt.
  void AttemptClosed(const AttemptResult& result, absl::Time now);
  /// The shell cannot go on (it has logged why and killed what it started): exit.
  void Fatal(int exit_code);
  /// Applies every deadline that has passed by `now`.
  void Tick(absl::Time now);

  /// Actions emitted since the last call, in the order they must run.
  std::vector<AgentAction> TakeActions();
  /// When Tick must next be called (InfiniteFuture when nothing is pending).
  absl::Time NextDeadline() const;

  Phase phase() const { return phase_; }
  bool done() const { return phase_ == Phase::kDone; }
  /// The current attempt's assignment, or the last one this node ran.
  const std::optional<Assignment>& assignment() const { return assignment_; }
  /// This node left the run while others may still run (the exit barrier timed out, or it
  /// left as unhealthy or excluded): a master it hosts must serve on until they end.
  bool others_still_run() const { return others_still_run_; }

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
  void RunRound(const Assignment& assignment, bool in_place);
  void SendJoin(const std::string& failed_check, absl::Time now);
  void CoolDown(absl::Time now);
  void StopThen(AfterStop next, absl::Time now);
  void Carry(AfterStop next, absl::Time now);
  void BeginStop(int signal, absl::Time now);
  void ExitAtRunEnd();
  void ExitAfterFailedRun();
  void Exit(int exit_code);
  void Kill(std::string why, absl::Time now);
  void CollectStacksIfRunning(bool collect_stacks);
  void Log(LogLevel level, std::string text);
  void Emit(AgentAction::Kind kind);
  void EmitWithSignal(AgentAction::Kind kind, int signal);
  void EmitForRound(AgentAction::Kind kind);
  std::string JoinTimeoutMessage() const;

  const AgentSettings settings_;
  Phase phase_ = Phase::kIdle;
  std::optional<Assignment> assignment_;  // the current attempt's, or the last one run
  bool stopping_ = false;                 // this attempt's workers were told to stop
  bool failure_reported_ = false;         // this attempt's failure went to the rendezvous
  bool closing_ = false;                  // kCloseAttempt emitted, AttemptClosed not yet back
  AfterStop after_stop_ = AfterStop::kNothing;
  std::optional<Assignment> next_round_;             // after_stop_ == kRunNext
  RunOutcome end_outcome_ = RunOutcome::kSucceeded;  // after_stop_ == kEnd
  std::string end_detail_;
  std::vector<ReportedFailure> end_root_cause_;
  int interrupted_by_ = 0;  // the first terminating signal, 0 if none
  std::optional<AttemptResult::RootCause> last_root_cause_;  // of the last failed attempt
  bool others_still_run_ = false;
  std::string unhealthy_;                         // why this node is unhealthy; empty: it is not
  std::optional<absl::Time> grace_deadline_;      // SIGKILL what still runs
  std::optional<absl::Time> kill_deadline_;       // what SIGKILL did not end is abandoned
  std::optional<absl::Time> join_deadline_;       // give up waiting for a round
  std::optional<absl::Time> progress_deadline_;   // say how the wait for a round goes
  absl::Time joined_at_;                          // when this node last asked for a round
  std::optional<absl::Time> heartbeat_deadline_;  // tell the master this node lives
  std::optional<absl::Time> cooldown_deadline_;   // join again after an exclusion
  absl::Duration cooldown_ = absl::ZeroDuration();
  std::vector<AgentAction> actions_;
};

}  // namespace ddprun
