#pragma once
// Facts about this host: a free port, its name, whether an address is its own.
#include <string>

#include "absl/status/statusor.h"

namespace ddprun {

/// A TCP port that is free on this host now, for MASTER_PORT: the kernel picks it (bind to
/// port 0) and the socket is closed again so that rank 0's worker can listen on it.
absl::StatusOr<int> ReserveFreePort();

/// This host's name (gethostname), for MASTER_ADDR and failure reports.
std::string HostName();

/// Whether `host` names this machine: localhost or a loopback address, this host's name
/// (or a longer name that begins with it and a dot: its FQDN, a Kubernetes pod's DNS name),
/// or a name or address that resolves to one of its interfaces' addresses (torchrun's
/// is_host inference for --rdzv-endpoint).
bool IsThisHost(const std::string& host);

}  // namespace ddprun
