#include "rendezvous/node_address.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/ip_address.h"

namespace ddprun {

absl::StatusOr<std::string> ReachableAddress(const NodeInfo& node, absl::string_view peer) {
  if (!node.addr.empty()) return node.addr;
  const std::string seen = PeerAddress(peer);
  if (!seen.empty() && !IsLoopbackOrUnspecified(seen)) return seen;
  if (!node.fallback_addr.empty()) return node.fallback_addr;
  return absl::FailedPreconditionError(absl::StrCat(
      node.host,
      ": no address that the other nodes can reach for MASTER_ADDR, should this "
      "node get group rank 0: it has no --local-addr, its connection to the rendezvous master "
      "comes from ",
      seen.empty() ? absl::StrCat("'", peer, "', which names no address")
                   : seen + ", a loopback address",
      ", and its host name resolves there only to loopback addresses (or not at all); start it "
      "with --local-addr=ADDRESS, an address of this node that the other nodes reach"));
}

absl::Status CheckAssignment(const Assignment& a, int local_world_size) {
  const auto bad = [](absl::string_view field, const auto& value, absl::string_view rule) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the rendezvous master assigned ", field, "=", value, ", which is not valid (", rule,
        "): is the endpoint a ddprun master of the same version, and the only one?"));
  };
  if (a.world_size < 1 || a.world_size > kMaxWorldSize) {
    return bad("WORLD_SIZE", a.world_size, absl::StrCat("1 to ", kMaxWorldSize));
  }
  if (a.base_rank < 0 || int64_t{a.base_rank} + local_world_size > a.world_size) {
    return bad("RANK of LOCAL_RANK 0", a.base_rank,
               absl::StrCat("this node's ", local_world_size, " ranks must lie in [0, ",
                            a.world_size, ")"));
  }
  if (a.group_world_size < 1 || a.group_rank < 0 || a.group_rank >= a.group_world_size) {
    return bad("GROUP_RANK", absl::StrCat(a.group_rank, " of ", a.group_world_size),
               "a rank below the number of nodes");
  }
  if (a.master_port < 1 || a.master_port > 65535)
    return bad("MASTER_PORT", a.master_port, "1-65535");
  if (!IsHostOrAddressText(a.master_addr)) {
    return bad("MASTER_ADDR", absl::StrCat("'", absl::CEscape(a.master_addr), "'"),
               "a host name or an IP address");
  }
  if (a.round < 0 || a.restart_count < 0) {
    return bad("round", absl::StrCat(a.round, " (restart ", a.restart_count, ")"), "not negative");
  }
  // Only probed and logged, but logged: a host and port, nothing that could forge a line.
  std::string neighbour = a.neighbour_store;
  neighbour.erase(std::remove_if(neighbour.begin(), neighbour.end(),
                                 [](char c) { return c == '[' || c == ']'; }),
                  neighbour.end());
  if (!a.neighbour_store.empty() && !IsHostOrAddressText(neighbour)) {
    return bad("neighbour_store", absl::StrCat("'", absl::CEscape(a.neighbour_store), "'"),
               "host:port");
  }
  return absl::OkStatus();
}

}  // namespace ddprun
