#pragma once
// The rendezvous backends, by --rdzv-backend name. A backend is its command-line rules, which
// node hosts the rendezvous master, and how a node starts its side of the rendezvous. c10d and
// static are backends.cc's own; any other is a module launcher/<name>_backend with a
// <Name>Backends() that returns its entries, named in launcher/CMakeLists.txt's
// backend_modules (which writes the calls into built_backends.cc), or one
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

/// The backends of the modules this build has (built_backends.cc, generated), after c10d
/// and static.
std::vector<RendezvousBackend> BuiltBackends();

/// Every backend, in the order --help lists them.
const std::vector<RendezvousBackend>& RendezvousBackends();
/// null: no backend has that name.
const RendezvousBackend* FindRendezvousBackend(const std::string& name);
std::vector<std::string> RendezvousBackendNames();
/// "c10d or static".
std::string RendezvousBackendChoices(const std::string& conjunction = "or");

}  // namespace ddprun
