#pragma once
// The rendezvous backends, by --rdzv-backend name. A backend is its command-line rules and
// how a node starts its side of the rendezvous; adding one is a module that provides both and
// one line in the registry (backends.cc).

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/agent_config.h"
#include "launcher/rendezvous_start.h"

namespace ddprun {

struct OptionValues;

struct RendezvousBackend {
  std::string name;  // --rdzv-backend
  // The rules of the command line with this backend, once every option is parsed.
  absl::Status (*check)(const OptionValues& values, AgentConfig& config) = nullptr;
  // Starts this node's side, or says why it cannot; `exit_code` is set then.
  std::unique_ptr<StartedRendezvous> (*start)(const AgentConfig& config, int& exit_code) = nullptr;
};

/// Every backend, in the order --help lists them.
const std::vector<RendezvousBackend>& RendezvousBackends();
/// null: no backend has that name.
const RendezvousBackend* FindRendezvousBackend(const std::string& name);
std::vector<std::string> RendezvousBackendNames();
/// "c10d or static".
std::string RendezvousBackendChoices(const std::string& conjunction = "or");

}  // namespace ddprun
