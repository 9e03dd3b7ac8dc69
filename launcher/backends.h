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
#include "launcher/rdzv_conf_keys.h"
#include "launcher/rendezvous_start.h"

namespace ddprun {

struct OptionValues;

/// Which agent hosts the rendezvous master (and its workers' store on the same port), unless
/// --rdzv-conf is_host= says.
enum class HostingRule {
  kEndpointHost,  // the agent on the endpoint's host (c10d, as torchrun infers it)
  kNodeRankZero,  // the agent with --node-rank=0 (static)
};

struct RendezvousBackend {
  std::string name;  // --rdzv-backend
  // The rules of the command line with this backend, once every option is parsed.
  absl::Status (*check)(const OptionValues& values, AgentConfig& config) = nullptr;
  // Starts this node's side, or says why it cannot; `exit_code` is set then.
  std::unique_ptr<StartedRendezvous> (*start)(const AgentConfig& config, int& exit_code) = nullptr;
  HostingRule hosting = HostingRule::kEndpointHost;
  // The --rdzv-conf keys it reads besides every backend's (rdzv_conf_keys.h).
  std::vector<RdzvConfKey> rdzv_conf_keys;
};

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
