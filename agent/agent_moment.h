#pragma once
// AgentMoment: one moment of a node's lifecycle, announced once (agent/moments.h) to all
// that write or count what happens: the event records, the metrics, the restart timeline,
// the hang report files and the run's round table. None of them decides anything. The rules
// announce what they decide (kMoment actions, which the scenario scripts show); the shell announces
// what only it sees (the workers started, how an attempt ended, the store's marks, the ranks'
// stacks and the master's hang report, the agent's exit); the restart timeline announces each
// restart it has made whole.

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "agent/failure_summary.h"
#include "agent/run_end.h"
#include "agent/worker_outcome.h"
#include "rendezvous/protocol_words.h"
#include "rendezvous/restart_split.h"
#include "rendezvous/stack_report.h"

namespace ddprun {

struct AgentMoment {
  enum class Kind {
    kJoinSent,            // rules: this node asked for a round, or a stop order brought its next
    kStopOrdered,         // rules: the rendezvous ordered the workers stopped; `membership_change`
    kFailureSeen,         // rules: the running attempt's first failed worker on this node
    kRoundStarting,       // rules: `assignment`'s workers start now
    kWorkersStarted,      // shell: `workers` (a failed start among them); `store_followed`: this
                          // node serves the round's store and reports its marks
    kWorkersStopped,      // rules: every worker of the attempt has exited
    kAttemptClosed,       // shell: `workers` as they ended; `failures` when one failed
    kEveryRankConnected,  // shell: round `round`'s ranks all reached its store;
                          // `barrier_expected`: a store barrier follows
    kBarrierPassed,       // shell: round `round`'s ranks passed the store's barrier
    kRestartExplained,    // the restart timeline: `split`, a restart made whole
    kMasterBack,          // rules: a master gave this node its place back in `round` after `lost`
    kRunEnded,            // rules: the rendezvous ended the run
    kStacksTaken,         // shell: `hang_report`, this node's ranks after a hang
    kStacksAsked,         // shell: `hang_report`, this node's ranks' stacks asked for (SIGUSR2)
    kHangReportArrived,   // shell: the master's merged report of `round`: `report_text`,
                          // `report_summary`
    kExiting,             // shell: the agent exits with `exit_code`; `run_end`: how the
                          // rendezvous ended the run, unless a signal stopped the agent first
  };
  Kind kind = Kind::kJoinSent;
  absl::Time at;
  std::optional<Assignment> assignment;
  int64_t round = -1;
  bool membership_change = false;
  bool store_followed = false;
  bool barrier_expected = false;
  absl::Duration lost;
  std::vector<WorkerOutcome> workers;
  std::vector<WorkerFailure> failures;
  std::optional<RestartSplit> split;
  std::optional<RunEnd> run_end;
  int exit_code = 0;
  std::optional<HangReport> hang_report;
  std::string report_text, report_summary;

  static AgentMoment Of(Kind kind, absl::Time at) {
    AgentMoment moment;
    moment.kind = kind;
    moment.at = at;
    return moment;
  }
};

/// The moment's name in scripts: "join-sent", "stop-ordered", ...
const char* MomentName(AgentMoment::Kind kind);

}  // namespace ddprun
