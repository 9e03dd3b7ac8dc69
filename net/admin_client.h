#pragma once
// The client side of the Admin service: `ddprun status` and `ddprun stop` (AdminCommand in
// network_plugin.h), with errors that say what to check.

#include <string>

#include "absl/status/statusor.h"
#include "net/network_plugin.h"

namespace ddprun {

/// Calls the master and returns what to print.
absl::StatusOr<std::string> RunAdminCommand(const AdminCommand& command);

}  // namespace ddprun
