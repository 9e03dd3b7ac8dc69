#pragma once
// What this node tells the rendezvous when it asks for a round (NodeInfo): who it is, where
// its workers' store is reached, where its run was, and why its health check failed; and
// whether the round that comes back can run here.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "agent/agent_config.h"
#include "agent/worker_store.h"
#include "rendezvous/protocol_words.h"

namespace ddprun {

struct JoiningNode {
  std::string host;
  std::string incarnation;           // random per agent process
  std::optional<WorkerStore> store;  // the store this agent serves; none: rank 0's worker's
  std::optional<Assignment> last;    // the last round this node ran
  std::string failed_check;          // why its health check failed; empty: it passed
  bool resume = false;               // it asks for its place back in `last`, which it runs
};

/// Whether the round the rendezvous assigned can run here: whatever a master sends, no
/// worker starts with a rank outside its world, an empty or forged MASTER_ADDR or a port
/// that cannot be; with several nodes (`agent_store`), MASTER_ADDR must resolve here, or
/// the workers would wait for each other until their timeout.
absl::Status CheckRoundHere(const Assignment& round, int nproc_per_node, bool agent_store);

/// One node's join. Without a store of the agent's (one node), rank 0's worker hosts the
/// TCPStore at --master-port or a port free now; failing to find one is an error.
absl::StatusOr<NodeInfo> JoinRequest(const AgentConfig& config, const JoiningNode& node);

}  // namespace ddprun
