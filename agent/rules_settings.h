#pragma once
// What the agent's rules (AgentSettings) take from the command line's AgentConfig and from
// the rendezvous connection, built once when the agent starts.

#include <string>

#include "agent/agent_config.h"
#include "agent/agent_state_machine.h"
#include "rendezvous/rendezvous_connection.h"

namespace ddprun {

/// `host`: this node's name in reports; `serves_store`: its agent serves the workers' store.
AgentSettings RulesSettings(const AgentConfig& config, const std::string& host,
                            const RendezvousConnection& rendezvous, bool serves_store);

}  // namespace ddprun
