#pragma once
// Moments: the one stream of a node's lifecycle moments (agent_moment.h). Each is announced
// once and seen by every observer, in the order they subscribed (as s6-supervise announces a
// state change once to every listener): a new observer is one Subscribe, not an edit at each
// place in the shell where something happens.

#include <deque>
#include <vector>

#include "agent/agent_moment.h"

namespace ddprun {

class MomentObserver {
 public:
  virtual ~MomentObserver() = default;
  virtual void See(const AgentMoment& moment) = 0;
};

class Moments {
 public:
  /// `observer` sees every moment announced from now on; it must outlive this stream.
  void Subscribe(MomentObserver& observer) { observers_.push_back(&observer); }
  /// Every observer sees `moment`. One announced while another is being seen (the restart
  /// timeline's split, made whole by a moment) follows it, once every observer saw the first.
  void Announce(AgentMoment moment);

 private:
  std::vector<MomentObserver*> observers_;
  std::deque<AgentMoment> pending_;
  bool announcing_ = false;
};

}  // namespace ddprun
