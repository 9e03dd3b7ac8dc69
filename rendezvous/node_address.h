#pragma once
// Which address the other nodes reach a node's TCPStore at, for MASTER_ADDR when it gets
// group rank 0 (docs/environment.md#master_addr-and-master_port). Pure.
//
// A host name is not good enough on its own: on most clusters a node's name resolves to a
// loopback address on the node itself (Debian maps it to 127.0.1.1) and to nothing on the
// others, and workers given such a MASTER_ADDR wait for each other until they time out.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rendezvous/protocol_words.h"

namespace ddprun {

/// OK when `assignment` is one a node with `local_world_size` workers can start: sizes at
/// least 1, ranks within them, a port in 1-65535, MASTER_ADDR a host or address. Else
/// InvalidArgument naming the field and its value (a master that is broken or not ours).
absl::Status CheckAssignment(const Assignment& assignment, int local_world_size);

/// In order: the address the node offers (`node.addr`: its --local-addr, or the endpoint's
/// host when the endpoint is its own machine); else the address its connection to the
/// master comes from (`peer`), which routes since it reached the master; else its host name
/// (`node.fallback_addr`), which it sends only when that resolves on the node to an address
/// that is not loopback. None of them: FailedPrecondition naming --local-addr.
absl::StatusOr<std::string> ReachableAddress(const NodeInfo& node, absl::string_view peer);

}  // namespace ddprun
