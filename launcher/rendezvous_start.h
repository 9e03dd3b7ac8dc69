#pragma once
// How a node starts its side of the rendezvous, for the backends of backends.h: a one-node
// job runs the master's rules in-process; a multi-node job loads the network plugin, hosts the
// master and the workers' store when it is this node's to host, and connects.

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "agent/agent_config.h"
#include "agent/elastic_agent.h"
#include "launcher/rendezvous_backend.h"
#include "net/network_plugin.h"
#include "rendezvous/rendezvous_connection.h"
#include "rendezvous/round_state_machine.h"

namespace ddprun {

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

/// Starts this node's side; null with `exit_code` set when it cannot (said in the log).
/// `endpoint_option` names where the master is, for messages. A job of several nodes goes
/// through the plugin's network half `backend` names (RendezvousBackend::network); when its
/// hosting rule is kElected, that half's `elect` decides which node hosts the master.
std::unique_ptr<StartedRendezvous> StartRendezvous(const RendezvousBackend& backend,
                                                   const AgentConfig& config,
                                                   const std::string& endpoint_option,
                                                   int& exit_code);

}  // namespace ddprun
