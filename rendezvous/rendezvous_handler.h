#pragma once
// The agent's view of a rendezvous: "I am here, ready for the next round" -> where this node
// sits in that round. The single-node rendezvous below implements it in-process; the gRPC
// master client (multi-node) implements the same interface.

#include <string>

#include "absl/status/statusor.h"

namespace ddprun {

/// Why the agent asks for a new round.
enum class RoundReason {
  kFirstJoin,      // the job is starting
  kWorkerFailure,  // a worker failed: spends one restart of the job's budget
};

struct JoinRequest {
  std::string host;
  std::string addr;          // where this node's workers can be reached (MASTER_ADDR if rank 0)
  int local_world_size = 1;
  int reserved_master_port = 0;  // a free port on this node, for MASTER_PORT if it is rank 0
  RoundReason reason = RoundReason::kFirstJoin;
};

struct RoundAssignment {
  int round = 0;
  int restart_count = 0;  // restarts spent so far: TORCHELASTIC_RESTART_COUNT
  int group_rank = 0;
  int group_world_size = 1;
  int base_rank = 0;  // RANK of this node's LOCAL_RANK 0
  int world_size = 1;
  std::string master_addr;
  int master_port = 0;
  std::string store_addr;  // "" when no Store service is offered
};

class RendezvousHandler {
 public:
  virtual ~RendezvousHandler() = default;
  /// The next round. ResourceExhausted when a failure finds the restart budget spent.
  virtual absl::StatusOr<RoundAssignment> NextRound(const JoinRequest& join) = 0;
};

}  // namespace ddprun
