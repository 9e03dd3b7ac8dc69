#pragma once
// What a rendezvous backend is (backends.h keeps the registry of them): its command-line
// rules, which node hosts the rendezvous master, how a node starts its side, its own
// --rdzv-conf keys. A backend module defines one; backends.cc lists it.

#include <memory>
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
  // False: torchrun's name for a listed backend (etcd for etcd-v3), accepted so that its
  // command lines work, and left out of --help, the completion and the error's list.
  bool listed = true;
};

}  // namespace ddprun
