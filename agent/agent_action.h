#pragma once
// AgentAction: what the agent's rules (agent_state_machine.h) ask their shell to do, in the
// order they must run. The vocabulary between the two, apart from the rules themselves.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "agent/agent_moment.h"
#include "common/log_level.h"
#include "rendezvous/protocol_words.h"

namespace ddprun {

struct AgentAction {
  enum class Kind {
    kCheckHealth,          // run the node's health checks; answer HealthChecked
    kJoin,                 // ask for the next round; `assignment`: the last one this node ran;
                           // `text`: why its health check failed (it then stays out); with
                           // `resume`: ask for its place back in `assignment`, which it runs
    kReconnect,            // open a new session to the master (a kJoin follows)
    kOpenStoreRound,       // the workers' store serves `assignment`'s round from now on
    kStartWorkers,         // `assignment`: the round to run
    kStopWorkers,          // `signal` to every worker still running
    kKillWorkers,          // SIGKILL to every worker still running; `text` says why
    kFreezeWorkers,        // stop every running worker where it is (SIGSTOP); no more hangs
    kCollectStacks,        // record where every frozen worker is, after `settle` (other
                           // nodes freeze theirs meanwhile); answer StacksTaken
    kKillHung,             // the workers taken for hung get the signal that ends them
    kAbandonWorkers,       // SIGKILL did not end them: report them unkillable, `text` says why
    kLeave,                // tell the rendezvous this node leaves for good; `text`: why
    kReportFailure,        // this attempt's failures to the rendezvous, for `round`
    kReportSuccess,        // every worker of `round` exited 0
    kReportStopped,        // a restart in place: every worker of `round` has exited
    kHeartbeat,            // proof of life to the master
    kCheckProgress,        // waiting for a round: find out how it goes; answer Progress
    kCheckReach,           // the master lost: does the host of `text` (host:port: group rank
                           // 0's store, or group rank 1's) answer? answer JobReach
    kEndStoreRound,        // the round is over everywhere: the workers' store closes connections
    kCloseAttempt,         // all workers exited: drain output, kill strays; answer AttemptClosed
    kWriteStopSummary,     // the job was stopped by `signal`: say so on stderr
    kWriteFailureSummary,  // this node's failures of the last failed attempt, on stderr
    kLog,                  // `text` at `level`
    kMoment,               // announce `moment` to the agent's observers (agent/moments.h)
    kExit,                 // the agent is done: exit with `exit_code`
  };
  Kind kind = Kind::kLog;
  std::optional<Assignment> assignment;
  absl::Duration settle = absl::ZeroDuration();  // kCollectStacks
  int signal = 0;
  int64_t round = 0;
  int exit_code = 0;
  bool resume = false;  // kJoin
  LogLevel level = LogLevel::kInfo;
  std::string text;
  AgentMoment moment;  // kMoment
};

}  // namespace ddprun
