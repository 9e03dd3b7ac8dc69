#pragma once
// What answers at a rendezvous master's address when gRPC does not get through: nothing
// (connection refused), nobody (no answer in time: a firewall, a host that is down), or a
// program that is not a ddprun master (it accepts the connection, but gRPC never becomes
// ready). An agent says which within seconds instead of waiting out join_timeout in silence.

#include <string>

#include "absl/time/time.h"

namespace ddprun {

struct EndpointReach {
  enum class Kind { kRefused, kNoAnswer, kListens, kUnresolved };
  Kind kind = Kind::kNoAnswer;
  std::string detail;  // the system's word for it ("Connection refused", "timed out", ...)
};

/// What a connect's error (0, or errno / SO_ERROR) says of the host: its kernel answered
/// (refused, reset), something listens (0), or nothing came back.
EndpointReach::Kind ReachOfConnectError(int error);

/// One TCP connect to `endpoint` ("host:port", "[v6]:port"), bounded by `timeout`. Blocks.
EndpointReach ProbeEndpoint(const std::string& endpoint, absl::Duration timeout);

/// What `reach` means for a master expected at `endpoint`, and what to check, in words:
/// "nothing listens on port 29400 of node0 (Connection refused): is the master up there, and
/// is --rdzv-endpoint right?". `named_by`: the options the user gave it with.
std::string DescribeUnansweredMaster(const std::string& endpoint, const EndpointReach& reach,
                                     const std::string& named_by = "--rdzv-endpoint");

}  // namespace ddprun
