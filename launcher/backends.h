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
#include "agent/elastic_agent.h"
#include "rendezvous/rendezvous_connection.h"

namespace ddprun {

struct OptionValues;

/// What a node runs for its rendezvous: the connection the agent uses, and what it serves
/// the job while the agent runs (a master, the workers' store).
class StartedRendezvous {
 public:
  virtual ~StartedRendezvous() = default;
  virtual RendezvousConnection& connection() = 0;
  /// The workers' TCPStore this agent serves (multi-node), or none.
  virtual std::optional<WorkerStore> worker_store() const = 0;
  /// After the agent's run: serve on while `others_still_run` if this node hosts what they
  /// use, then stop.
  virtual void Stop(bool others_still_run) = 0;
  /// Serves --metrics-port: `agent`'s metrics, and the master's status and page when this
  /// node hosts the master. The error says why it cannot (the port is taken).
  virtual absl::Status ServeMetrics(int port, const AgentMetricsBoard* agent) = 0;
};

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
