#pragma once
// The gRPC half of the network plugin (net/network_library.cc), as the plugin's other halves
// build on it: an elected backend's half fills its NetworkPlugin from the gRPC half's entry
// point and hosts its leader's master with HostMaster.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "net/network_plugin.h"

namespace ddprun {

/// A ddprun rendezvous master with its metrics, as the plugin hosts one.
absl::StatusOr<std::unique_ptr<HostedMaster>> HostMaster(const MasterOptions& options);

/// An elected backend's half: the gRPC half's entry points, with `elect` and an `admin` that
/// finds the run's leader first; no `connect` (every node is the leader's client instead).
void FillElectedHalf(NetworkPlugin* plugin,
                     std::unique_ptr<ElectedRendezvous> (*elect)(const ElectionOptions&),
                     absl::StatusOr<std::string> (*admin)(const AdminCommand&));

}  // namespace ddprun
