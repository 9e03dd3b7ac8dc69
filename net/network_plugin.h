#pragma once
// The multi-node half of the agent (gRPC, protobuf's services) lives in a shared library,
// libddprun_network.so, that `ddprun` loads only when a job spans several nodes. A one-node
// job therefore maps none of gRPC: it starts faster and stays smaller (docs/performance.md).
// This header is all the agent sees of it: plain C entry points and abstract classes.

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "master/master_options.h"
#include "observability/agent_metrics.h"
#include "rendezvous/backend_settings.h"
#include "rendezvous/rendezvous_connection.h"
#include "rendezvous/tls_config.h"

namespace ddprun {

/// A rendezvous master served inside this process.
class HostedMaster {
 public:
  virtual ~HostedMaster() = default;
  virtual int port() const = 0;
  /// Stops accepting, lets open sessions finish until `grace` has passed, then cancels.
  virtual void Shutdown(absl::Duration grace) = 0;
  /// How many agents hold a session in `run_id`, and an eventfd readable when one leaves or
  /// a run ends.
  virtual int SessionCount(const std::string& run_id) const = 0;
  /// `run_id` has not ended, or agents still hold sessions in it: others may need it still.
  virtual bool RunGoesOn(const std::string& run_id) const = 0;
  virtual int session_end_fd() const = 0;
  /// With MasterOptions::adopt_connections: serves a connection accepted on the port this
  /// master shares with the workers' TCPStore (MasterServer::AdoptConnection).
  virtual void AdoptConnection(int listen_fd, int fd) = 0;
};

struct NetworkRendezvousOptions {
  std::string endpoint;  // host:port of the master
  std::string run_id;
  std::string token;
  RendezvousSettings settings;
  absl::Duration heartbeat_timeout = absl::Seconds(5);  // see AgentConfig
  TlsConfig tls;
  // The options that name `endpoint`, for what a node that gets no answer should check.
  std::string endpoint_named_by = "--rdzv-endpoint";
};

/// A node's rendezvous through an election (the etcd half): the nodes elect the run's leader,
/// which hosts the rendezvous master; every node, the leader too, is a client of the leader's
/// master, and follows the leadership when it moves (docs/etcd.md).
class ElectedRendezvous : public RendezvousConnection {
 public:
  /// The master this node hosts while it leads the run; null when it does not. Call on the
  /// agent's thread.
  virtual HostedMaster* hosted_master() = 0;
  /// Ends this node's session with the leader's master (the agent's run is over), before a
  /// leader serves the others on (its own session would count as one that goes on).
  virtual void CloseSession() = 0;
};

struct ElectionOptions {
  NetworkRendezvousOptions rendezvous;  // its endpoint is unused: the election names the leader
  // The backend's own settings (AgentConfig::backend): where its store is, how to reach it.
  std::shared_ptr<const BackendSettings> backend;
  // What this node hosts with while it leads: a master that shares its workers' store port
  // (adopt_connections).
  MasterOptions master;
  std::string self;  // "host:port": where the others reach the master this node hosts
  // Called with the master this node now hosts, and with null before it stops: the workers'
  // store hands that master the gRPC connections that arrive on its port. From the
  // election's thread.
  std::function<void(HostedMaster*)> on_lead;
};

/// `ddprun status` and `ddprun stop`: one call to a master's Admin service.
struct AdminCommand {
  enum class Kind { kStatus, kStop };
  Kind kind = Kind::kStatus;
  std::string endpoint;  // host:port of the master
  std::string run_id;    // kStatus: empty lists every run
  std::string token;
  TlsConfig tls;
  bool json = false;   // kStatus: the StatusReply as JSON, not the table
  std::string reason;  // kStop: said in every agent's log
  absl::Duration timeout = absl::Seconds(10);
  // A backend's own settings, when its half finds the master first (an elected run: its
  // leader's); `endpoint` is unused then.
  std::shared_ptr<const BackendSettings> backend;
};

/// The HTTP server of --metrics-port (metrics_http.h), as the agent holds it.
class MetricsEndpoint {
 public:
  virtual ~MetricsEndpoint() = default;
  virtual int port() const = 0;
};

struct MetricsEndpointOptions {
  std::string host = "0.0.0.0";
  int port = 0;
  HostedMaster* master = nullptr;            // set: its metrics, status and page too
  const AgentMetricsBoard* agent = nullptr;  // set: the agent's own metrics
};

/// The plugin's entry points, looked up with dlsym.
struct NetworkPlugin {
  std::unique_ptr<RendezvousConnection> (*connect)(const NetworkRendezvousOptions&);
  absl::StatusOr<std::unique_ptr<HostedMaster>> (*host_master)(const MasterOptions&);
  /// What to print: the status (a table or JSON), or what the stop did.
  absl::StatusOr<std::string> (*admin)(const AdminCommand&);
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> (*serve_metrics)(const MetricsEndpointOptions&);
  /// OK when a ddprun rendezvous master answers at options.endpoint within `timeout`; else
  /// Unavailable, saying what answers there instead (a port held by another program).
  absl::Status (*probe_master)(const NetworkRendezvousOptions&, absl::Duration timeout);
  /// The etcd half only (null in the gRPC half): joins the election of the run's leader.
  std::unique_ptr<ElectedRendezvous> (*elect)(const ElectionOptions&) = nullptr;
};

/// The network half c10d and static use, and what every admin command and metrics page use:
/// gRPC to a ddprun master.
inline constexpr char kGrpcNetwork[] = "grpc";
/// The etcd-v3 backend's half: the gRPC half's entry points, `elect` through etcd, and an
/// `admin` that finds the run's leader in etcd first.
inline constexpr char kEtcdNetwork[] = "etcd";

/// Loads libddprun_network.so from next to the running executable, then from
/// ../lib/ddprun/, then from the library path, and takes its network half `half`: the entry
/// point ddprun_network_<half>_v3, which fills a NetworkPlugin. A backend's start names its
/// half; a plugin may hold several, each behind its own entry. The error says where it
/// looked, and names the half when a plugin lacks it.
absl::StatusOr<NetworkPlugin> LoadNetworkPlugin(const std::string& half = kGrpcNetwork);

}  // namespace ddprun

extern "C" {
/// Defined in the plugin: the gRPC half (kGrpcNetwork), which fills `plugin` with its entry
/// points.
void ddprun_network_grpc_v3(ddprun::NetworkPlugin* plugin);
/// The etcd half (kEtcdNetwork).
void ddprun_network_etcd_v3(ddprun::NetworkPlugin* plugin);
}
