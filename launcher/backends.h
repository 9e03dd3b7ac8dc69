#pragma once
// The rendezvous backends, by --rdzv-backend name. A backend is its command-line rules, which
// node hosts the rendezvous master, and how a node starts its side of the rendezvous; adding
// one is a module that provides them and one line in the registry (backends.cc), or one
// RegisterRendezvousBackend call before the command line is parsed.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/agent_config.h"
#include "launcher/rendezvous_backend.h"

namespace ddprun {

/// Adds `backend` to the registry (a name already there is an error), for a backend defined
/// outside backends.cc; call it before the command line is parsed.
absl::Status RegisterRendezvousBackend(RendezvousBackend backend);

/// `config.is_host` as `backend`'s hosting rule sets it, unless --rdzv-conf is_host= gave it:
/// kNodeRankZero decides here; kEndpointHost leaves it to the start, which knows this host.
void ApplyHostingRule(const RendezvousBackend& backend, AgentConfig& config);

/// Every backend, in the order --help lists them.
const std::vector<RendezvousBackend>& RendezvousBackends();
/// null: no backend has that name.
const RendezvousBackend* FindRendezvousBackend(const std::string& name);
std::vector<std::string> RendezvousBackendNames();
/// "c10d or static".
std::string RendezvousBackendChoices(const std::string& conjunction = "or");

}  // namespace ddprun
