#pragma once
// One AgentAction as a line of a transcript ("stop-workers SIGTERM", "exit 75",
// "log warning: ..."), for the agent's rule tests and scenarios.

#include <string>

#include "absl/strings/str_cat.h"
#include "agent/agent_state_machine.h"
#include "common/process_status.h"

namespace ddprun {

// "moment stop-ordered membership", "moment round-starting round=1 restarts=1", ...
inline std::string DescribeMoment(const AgentMoment& m) {
  std::string line = absl::StrCat("moment ", MomentName(m.kind));
  if (m.assignment) {
    absl::StrAppend(&line, " round=", m.assignment->round,
                    " restarts=", m.assignment->restart_count);
  }
  if (m.kind == AgentMoment::Kind::kMasterBack) {
    absl::StrAppend(&line, " round=", m.round, " lost=", absl::FormatDuration(m.lost));
  }
  if (m.membership_change) absl::StrAppend(&line, " membership");
  return line;
}

inline std::string DescribeAction(const AgentAction& a) {
  using Kind = AgentAction::Kind;
  switch (a.kind) {
    case Kind::kCheckHealth:
      return "check-health";
    case Kind::kJoin:
      if (a.resume) return absl::StrCat("join resume=", a.assignment->round);
      return absl::StrCat(a.assignment ? absl::StrCat("join after=", a.assignment->round) : "join",
                          a.text.empty() ? "" : absl::StrCat(" unhealthy (", a.text, ")"));
    case Kind::kReconnect:
      return "reconnect";
    case Kind::kCheckReach:
      return absl::StrCat("check-reach ", a.text);
    case Kind::kStartWorkers:
      return absl::StrCat("start-workers round=", a.assignment->round,
                          " restarts=", a.assignment->restart_count);
    case Kind::kOpenStoreRound:
      return absl::StrCat("open-store-round round=", a.assignment->round);
    case Kind::kStopWorkers:
      return absl::StrCat("stop-workers ", SignalName(a.signal));
    case Kind::kKillWorkers:
      return absl::StrCat("kill-workers (", a.text, ")");
    case Kind::kFreezeWorkers:
      return "freeze-workers";
    case Kind::kCollectStacks:
      return absl::StrCat("collect-stacks settle=", absl::FormatDuration(a.settle));
    case Kind::kKillHung:
      return "kill-hung";
    case Kind::kAbandonWorkers:
      return absl::StrCat("abandon-workers (", a.text, ")");
    case Kind::kLeave:
      return absl::StrCat("leave (", a.text, ")");
    case Kind::kReportFailure:
      return absl::StrCat("report-failure round=", a.round);
    case Kind::kReportSuccess:
      return absl::StrCat("report-success round=", a.round);
    case Kind::kReportStopped:
      return absl::StrCat("report-stopped round=", a.round);
    case Kind::kHeartbeat:
      return "heartbeat";
    case Kind::kCheckProgress:
      return "check-progress";
    case Kind::kEndStoreRound:
      return "end-store-round";
    case Kind::kCloseAttempt:
      return "close-attempt";
    case Kind::kWriteStopSummary:
      return absl::StrCat("stop-summary ", SignalName(a.signal));
    case Kind::kWriteFailureSummary:
      return "failure-summary";
    case Kind::kLog: {
      const char* level = a.level == LogLevel::kInfo      ? "info"
                          : a.level == LogLevel::kWarning ? "warning"
                                                          : "error";
      return absl::StrCat("log ", level, ": ", a.text);
    }
    case Kind::kExit:
      return absl::StrCat("exit ", a.exit_code);
    case Kind::kMoment:
      return DescribeMoment(a.moment);
  }
  return "?";
}

}  // namespace ddprun
