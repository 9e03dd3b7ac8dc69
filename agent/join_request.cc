#include "agent/join_request.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/ip_address.h"
#include "common/status_macros.h"
#include "node/host_info.h"
#include "rendezvous/node_address.h"

namespace ddprun {

absl::Status CheckRoundHere(const Assignment& round, int nproc_per_node, bool agent_store) {
  DDPRUN_RETURN_IF_ERROR(CheckAssignment(round, nproc_per_node));
  if (!agent_store) return absl::OkStatus();
  if (absl::Status s = CheckResolves(round.master_addr, "MASTER_ADDR"); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(),
                                               " (the address of group rank 0's store: the "
                                               "endpoint's host, that node's --local-addr or its "
                                               "host name; start it with --local-addr=IP)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<NodeInfo> JoinRequest(const AgentConfig& config, const JoiningNode& joining) {
  NodeInfo node;
  node.host = joining.host;
  node.failed_check = joining.failed_check;
  node.pid = static_cast<int>(::getpid());
  node.incarnation = joining.incarnation;
  node.local_world_size = config.nproc_per_node;
  node.node_rank_hint = config.node_rank_given || config.fixed_node_rank ? config.node_rank : -1;
  if (joining.store) {  // where this node's agent serves the workers' TCPStore
    node.addr = joining.store->offer.addr;
    node.fallback_addr = joining.store->offer.fallback_addr;
    node.master_port = joining.store->port;
    node.addresses = OwnIpAddresses();  // where this node's workers connect from
    // The store's port serves every round; a health check must run before each round.
    node.restarts_in_place = !config.health_check.any();
  } else {  // one node: rank 0's worker hosts the TCPStore on a port free now
    node.addr = config.master_addr;
    absl::StatusOr<int> port =
        config.master_port ? absl::StatusOr<int>(*config.master_port) : FindFreePort();
    if (!port.ok()) return port.status();
    node.master_port = *port;
  }
  if (joining.last) {
    node.last_round = joining.last->round;
    node.restarts_seen = joining.last->restart_count;
    if (joining.resume) node.resume = joining.last;
  }
  return node;
}

}  // namespace ddprun
