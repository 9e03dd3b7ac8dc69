#pragma once
// IP addresses and host names as text: what a gRPC peer string names, the canonical form of
// an address, loopback or not, whether a host resolves here. Used by the master, the agent's
// stores and the worker SDK.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

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

}  // namespace ddprun
