#pragma once
// How the end of a run becomes this agent's exit status, and the lines that say why. Pure; a
// part of the agent's rules (agent_state_machine.h), apart so that the outcomes read as one
// table.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/log_level.h"
#include "rendezvous/protocol_words.h"

namespace ddprun {

/// The root cause of this node's last failed attempt.
struct NodeRootCause {
  int rank = 0;
  int shell_exit_code = 1;  // what a shell would report for it (128+N for signal N)
  bool hung = false;        // taken for hung: the signal that ended it was the agent's
};

/// The run's end, as the rendezvous said it.
struct RunEnd {
  RunOutcome outcome = RunOutcome::kSucceeded;
  std::string detail;
  std::vector<ReportedFailure> root_cause;  // the earliest failure anywhere, when it failed
  std::vector<std::string> excluded;        // the nodes the run kept out, and why
};

/// What this node knows at the end.
struct NodeAtEnd {
  std::string host;
  bool has_token = false;  // only the job's own operators could have stopped it
  std::optional<NodeRootCause> root_cause;
  // It ran in the run's last round, as ranks [first_rank, first_rank + ranks).
  bool in_last_round = false;
  int first_rank = 0;
  int ranks = 0;
  // It ran in some round of the run: a node that never did only waited for a place.
  bool ever_placed = false;
  std::string master;  // where the run's master is, for the lines
};

struct RunExit {
  int exit_code = 0;
  bool failure_summary = false;   // write this node's failure summary first
  bool others_still_run = false;  // a master this node hosts must serve on
  std::vector<std::pair<LogLevel, std::string>> lines;
};

RunExit ExitForRunEnd(const RunEnd& end, const NodeAtEnd& node);

}  // namespace ddprun
