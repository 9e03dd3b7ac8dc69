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
#include "net/network_plugin.h"

namespace ddprun {

struct OptionValues;
class StartedRendezvous;  // rendezvous_start.h

/// Which agent hosts the rendezvous master (and its workers' store on the same port), unless
/// --rdzv-conf is_host= says.
enum class HostingRule {
  kEndpointHost,  // the agent on the endpoint's host (c10d, as torchrun infers it)
  kNodeRankZero,  // the agent with --node-rank=0 (static)
  // The one its nodes elect (etcd-v3), for as long as it leads: any node, on its workers'
  // store's port; the network half's `elect` runs the election.
  kElected,
};

struct RendezvousBackend {
  std::string name;  // --rdzv-backend
  // The rules of the command line with this backend, once every option is parsed.
  absl::Status (*check)(const OptionValues& values, AgentConfig& config) = nullptr;
  // Starts this node's side (given the backend's own entry), or says why it cannot;
  // `exit_code` is set then.
  std::unique_ptr<StartedRendezvous> (*start)(const RendezvousBackend& backend,
                                              const AgentConfig& config, int& exit_code) = nullptr;
  HostingRule hosting = HostingRule::kEndpointHost;
  // The --rdzv-conf keys it reads besides every backend's (rdzv_conf_keys.h).
  std::vector<RdzvConfKey> rdzv_conf_keys;
  // False: torchrun's name for a listed backend (etcd for etcd-v3), accepted so that its
  // command lines work, and left out of --help, the completion and the error's list.
  bool listed = true;
  // The network plugin's half its multi-node agents and `ddprun status`/`stop` load
  // (net/network_plugin.h).
  std::string network = kGrpcNetwork;
  // How `ddprun status`/`stop` find the run's master from --rdzv-endpoint and --rdzv-id, with
  // the agents' --rdzv-conf in `config` (its files read), filling `command`. Null: the
  // endpoint is the master, HOST[:PORT].
  absl::Status (*find_master)(const std::string& endpoint, const std::string& run_id,
                              AgentConfig& config, AdminCommand& command) = nullptr;
  // --rdzv-endpoint may name several hosts (an elected backend's store members).
  bool several_endpoints = false;
  // Adds to `notices` what its own settings expose (a password file others can read, a
  // password sent in clear text); null: nothing of its own.
  void (*note_secrets)(const AgentConfig& config, std::vector<std::string>& notices) = nullptr;
};

}  // namespace ddprun
