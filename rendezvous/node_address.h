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
#include "rendezvous/round_state_machine.h"

namespace ddprun {

/// OK when `host` (a name or an address) resolves on this node; else FailedPrecondition
/// naming it as `what` ("--rdzv-endpoint host", "MASTER_ADDR") with the resolver's reason.
/// Names that do not resolve are said at once: clients that retry them wait out their timeout.
absl::Status CheckResolves(const std::string& host, absl::string_view what);

/// The IP address in a gRPC peer string ("ipv4:10.0.0.2:41234", "ipv6:%5Bfd00::2%5D:41234"),
/// or empty when the string names none ("fd:7", "unix:/path").
std::string PeerAddress(absl::string_view peer);

/// `text` as inet_ntop writes it ("10.0.0.2", "fd00::2"; an IPv4-mapped IPv6 address as
/// IPv4), or empty when it is not an IP address.
std::string CanonicalIp(absl::string_view text);

/// Whether `addr` is an IP address of loopback (127.0.0.0/8, ::1) or of no host (0.0.0.0, ::).
bool IsLoopbackOrUnspecified(absl::string_view addr);

/// Whether `text` can be a host name or an IP address: 1-255 letters, digits and ".-_:%[]"
/// (IPv6 and its zone). Anything else (a space, a newline that would forge a log line) is
/// not, whatever a peer sends.
bool IsHostOrAddressText(absl::string_view text);

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
