#pragma once
// How a node starts its side of the rendezvous, for the backends of backends.h: a one-node
// job runs the master's rules in-process; a multi-node job loads the network plugin, hosts the
// master and the workers' store when it is this node's to host, and connects.

#include <memory>
#include <string>

#include "launcher/backends.h"
#include "rendezvous/round_state_machine.h"

namespace ddprun {

/// The rendezvous settings of the job, as every rendezvous (local or a master) applies them.
RendezvousSettings RendezvousSettingsFrom(const AgentConfig& config);

/// Starts this node's side; null with `exit_code` set when it cannot (said in the log).
/// `endpoint_option` names where the master is, for messages.
std::unique_ptr<StartedRendezvous> StartRendezvous(const AgentConfig& config,
                                                   const std::string& endpoint_option,
                                                   int& exit_code);

}  // namespace ddprun
