#pragma once
#include <string>

#include "absl/status/statusor.h"

namespace ddprun {

/// A TCP port that is free on this host now, for MASTER_PORT: the kernel picks it (bind to
/// port 0) and the socket is closed again so that rank 0's worker can listen on it.
absl::StatusOr<int> ReserveFreePort();

/// This host's name (gethostname), for MASTER_ADDR and failure reports.
std::string HostName();

}  // namespace ddprun
