#include "agent/moments.h"

#include <utility>

namespace ddprun {

void Moments::Announce(AgentMoment moment) {
  pending_.push_back(std::move(moment));
  if (announcing_) return;
  announcing_ = true;
  while (!pending_.empty()) {
    const AgentMoment next = std::move(pending_.front());
    pending_.pop_front();
    for (MomentObserver* observer : observers_) observer->See(next);
  }
  announcing_ = false;
}

const char* MomentName(AgentMoment::Kind kind) {
  using Kind = AgentMoment::Kind;
  switch (kind) {
    case Kind::kJoinSent:
      return "join-sent";
    case Kind::kStopOrdered:
      return "stop-ordered";
    case Kind::kFailureSeen:
      return "failure-seen";
    case Kind::kRoundStarting:
      return "round-starting";
    case Kind::kWorkersStarted:
      return "workers-started";
    case Kind::kWorkersStopped:
      return "workers-stopped";
    case Kind::kAttemptClosed:
      return "attempt-closed";
    case Kind::kEveryRankConnected:
      return "every-rank-connected";
    case Kind::kBarrierPassed:
      return "barrier-passed";
    case Kind::kRestartExplained:
      return "restart-explained";
    case Kind::kMasterBack:
      return "master-back";
    case Kind::kRunEnded:
      return "run-ended";
    case Kind::kStacksTaken:
      return "stacks-taken";
    case Kind::kStacksAsked:
      return "stacks-asked";
    case Kind::kHangReportArrived:
      return "hang-report-arrived";
    case Kind::kExiting:
      return "exiting";
  }
  return "?";
}

}  // namespace ddprun
