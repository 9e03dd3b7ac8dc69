#pragma once
// The rendezvous of a one-node job (--standalone, or --nnodes=1): no network, one member,
// rank 0 is this node, and the restart budget is kept here. Pure: no I/O, no clock.

#include "rendezvous/rendezvous_handler.h"

namespace ddprun {

class SingleNodeRendezvous : public RendezvousHandler {
 public:
  explicit SingleNodeRendezvous(int max_restarts) : max_restarts_(max_restarts) {}

  absl::StatusOr<RoundAssignment> NextRound(const JoinRequest& join) override;

  int restarts_spent() const { return restarts_spent_; }

 private:
  int max_restarts_;
  int restarts_spent_ = 0;
  int next_round_ = 0;
};

}  // namespace ddprun
