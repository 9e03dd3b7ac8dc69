// The plugin side of network_plugin.h, its gRPC half: built into libddprun_network.so only
// (into ddprun itself in a portable build). Other halves (net/etcd_network.cc) build on it.

#include "net/grpc_network.h"

#include "master/master_http.h"
#include "master/master_server.h"
#include "net/admin_client.h"
#include "net/grpc_rendezvous.h"
#include "observability/master_metrics.h"
#include "observability/metrics_http.h"
#include "rpc/wire.h"

namespace ddprun {
namespace {

class GrpcHostedMaster : public HostedMaster {
 public:
  GrpcHostedMaster(std::unique_ptr<MasterMetrics> metrics, std::unique_ptr<MasterServer> server)
      : metrics_(std::move(metrics)), server_(std::move(server)) {}
  int port() const override { return server_->port(); }
  void Shutdown(absl::Duration grace) override { server_->Shutdown(grace); }
  int SessionCount(const std::string& run_id) const override {
    return server_->SessionCount(run_id);
  }
  bool RunGoesOn(const std::string& run_id) const override { return server_->RunGoesOn(run_id); }
  int session_end_fd() const override { return server_->session_end_fd(); }
  void AdoptConnection(int listen_fd, int fd) override { server_->AdoptConnection(listen_fd, fd); }
  MasterServer& server() { return *server_; }
  const MasterMetrics& metrics() const { return *metrics_; }

 private:
  std::unique_ptr<MasterMetrics> metrics_;  // before server_: it counts into it to the end
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
  // Every HostedMaster is this plugin's own.
  auto* master = static_cast<GrpcHostedMaster*>(options.master);
  absl::StatusOr<std::unique_ptr<MetricsHttp>> served =
      master != nullptr ? ServeMasterMetrics(master->server(), master->metrics(), http)
                        : MetricsHttp::Start(http);
  if (!served.ok()) return served.status();
  return std::unique_ptr<MetricsEndpoint>(new HttpEndpoint(std::move(*served)));
}

}  // namespace

void FillElectedHalf(NetworkPlugin* plugin,
                     std::unique_ptr<ElectedRendezvous> (*elect)(const ElectionOptions&),
                     absl::StatusOr<std::string> (*admin)(const AdminCommand&)) {
  ddprun_network_grpc_v3(plugin);
  plugin->connect = nullptr;
  plugin->elect = elect;
  plugin->admin = admin;
}

absl::StatusOr<std::unique_ptr<HostedMaster>> HostMaster(const MasterOptions& options) {
  auto metrics = std::make_unique<MasterMetrics>();
  MasterOptions counted = options;
  counted.metrics = metrics.get();
  absl::StatusOr<std::unique_ptr<MasterServer>> server = MasterServer::Start(counted);
  if (!server.ok()) return server.status();
  return std::unique_ptr<HostedMaster>(
      new GrpcHostedMaster(std::move(metrics), std::move(*server)));
}

}  // namespace ddprun

extern "C" void ddprun_network_grpc_v3(ddprun::NetworkPlugin* plugin) {
  ddprun::RouteGrpcLogsToSpdlog();
  ddprun::DisableMutexDeadlockDetection();  // the agent's own code holds no absl::Mutex
  plugin->connect = &ddprun::Connect;
  plugin->host_master = &ddprun::HostMaster;
  plugin->admin = &ddprun::RunAdminCommand;
  plugin->serve_metrics = &ddprun::ServeMetrics;
  plugin->probe_master = &ddprun::ProbeMaster;
}
