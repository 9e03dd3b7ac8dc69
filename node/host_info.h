#pragma once
// Facts about this host: a free port, its name, whether an address is its own.
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddprun {

/// A TCP port that is free on this host now, for MASTER_PORT: the kernel picks it (bind to
/// port 0) and the socket is closed again so that rank 0's worker can listen on it.
absl::StatusOr<int> FindFreePort();

/// This host's name (gethostname), for node order and failure reports.
std::string HostName();

/// Whether `name` resolves here to at least one address that is not loopback.
bool ResolvesBeyondLoopback(const std::string& name);

/// One of this host's network interfaces; an empty name: none.
struct NetworkInterface {
  std::string name;
  bool loopback = false;
};

/// The interface that holds `local_address`, an address of this host.
NetworkInterface InterfaceHolding(const std::string& local_address);

/// The interface that holds the address this host sends from to reach `addr` (a name or an
/// address); none when that cannot be told. Nothing is sent: a UDP socket is connected and
/// asked for its local address.
NetworkInterface InterfaceToward(const std::string& addr);
/// The address this host sends from to reach `addr`, the same way; "" when it cannot be told.
std::string AddressToward(const std::string& addr);

/// This host's IP addresses, loopback aside, each once, in inet_ntop's form: at most
/// `limit` of them (the join carries 64).
std::vector<std::string> OwnIpAddresses(size_t limit = 64);

/// Whether `host` names this machine: localhost or a loopback address, this host's name
/// (or a longer name that begins with it and a dot: its FQDN, a Kubernetes pod's DNS name),
/// or a name or address that resolves to one of its interfaces' addresses (torchrun's
/// is_host inference for --rdzv-endpoint).
bool IsThisHost(const std::string& host);

}  // namespace ddprun
