// The plugin side of network_plugin.h: built into libddprun_network.so only.

#include "rendezvous/network_plugin.h"

#include "rendezvous/admin_client.h"
#include "rendezvous/grpc_rendezvous.h"
#include "rendezvous/master_metrics.h"
#include "rendezvous/master_server.h"
#include "rendezvous/metrics_http.h"
#include "rendezvous/wire.h"

namespace ddprun {
namespace {

class GrpcHostedMaster : public HostedMaster {
 public:
  explicit GrpcHostedMaster(std::unique_ptr<MasterServer> server) : server_(std::move(server)) {}
  int port() const override { return server_->port(); }
  void Shutdown(absl::Duration grace) override { server_->Shutdown(grace); }
  int SessionCount(const std::string& run_id) const override {
    return server_->SessionCount(run_id);
  }
  bool RunGoesOn(const std::string& run_id) const override { return server_->RunGoesOn(run_id); }
  int session_end_fd() const override { return server_->session_end_fd(); }
  void AdoptConnection(int listen_fd, int fd) override { server_->AdoptConnection(listen_fd, fd); }
  MasterServer& server() { return *server_; }

 private:
  std::unique_ptr<MasterServer> server_;
};

std::unique_ptr<RendezvousConnection> Connect(const NetworkRendezvousOptions& options) {
  return std::make_unique<GrpcRendezvous>(options);
}

class HttpEndpoint : public MetricsEndpoint {
 public:
  explicit HttpEndpoint(std::unique_ptr<MetricsHttp> http) : http_(std::move(http)) {}
  int port() const override { return http_->port(); }

 private:
  std::unique_ptr<MetricsHttp> http_;
};

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> ServeMetrics(
    const MetricsEndpointOptions& options) {
  MetricsHttpOptions http;
  http.host = options.host;
  http.port = options.port;
  if (options.agent != nullptr) {
    http.agent_metrics = [board = options.agent] { return AgentMetricFamilies(board->Read()); };
  }
  absl::StatusOr<std::unique_ptr<MetricsHttp>> served =
      options.master != nullptr
          // Every HostedMaster is this plugin's own.
          ? static_cast<GrpcHostedMaster*>(options.master)->server().ServeMetrics(http)
          : MetricsHttp::Start(http);
  if (!served.ok()) return served.status();
  return std::unique_ptr<MetricsEndpoint>(new HttpEndpoint(std::move(*served)));
}

absl::StatusOr<std::unique_ptr<HostedMaster>> HostMaster(const MasterOptions& options) {
  absl::StatusOr<std::unique_ptr<MasterServer>> server = MasterServer::Start(options);
  if (!server.ok()) return server.status();
  return std::unique_ptr<HostedMaster>(new GrpcHostedMaster(std::move(*server)));
}

}  // namespace
}  // namespace ddprun

extern "C" void ddprun_network_plugin_v3(ddprun::NetworkPlugin* plugin) {
  ddprun::RouteGrpcLogsToSpdlog();
  ddprun::DisableMutexDeadlockDetection();  // the agent's own code holds no absl::Mutex
  plugin->connect = &ddprun::Connect;
  plugin->host_master = &ddprun::HostMaster;
  plugin->admin = &ddprun::RunAdminCommand;
  plugin->serve_metrics = &ddprun::ServeMetrics;
  plugin->probe_master = &ddprun::ProbeMaster;
}
