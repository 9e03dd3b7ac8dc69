#include "rendezvous/single_node_rendezvous.h"

#include "absl/strings/str_cat.h"

namespace ddprun {

absl::StatusOr<RoundAssignment> SingleNodeRendezvous::NextRound(const JoinRequest& join) {
  if (join.reason == RoundReason::kWorkerFailure) {
    if (restarts_spent_ >= max_restarts_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("restart budget spent (", restarts_spent_, " of --max-restarts=",
                       max_restarts_, ")"));
    }
    ++restarts_spent_;
  }
  RoundAssignment round;
  round.round = next_round_++;
  round.restart_count = restarts_spent_;
  round.group_rank = 0;
  round.group_world_size = 1;
  round.base_rank = 0;
  round.world_size = join.local_world_size;
  round.master_addr = join.addr;
  round.master_port = join.reserved_master_port;
  return round;
}

}  // namespace ddprun
