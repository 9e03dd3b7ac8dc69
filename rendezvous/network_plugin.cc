// The plugin side of network_plugin.h: built into libddprun_network.so only.

#include "rendezvous/network_plugin.h"

#include "rendezvous/grpc_rendezvous.h"
#include "rendezvous/master_server.h"
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
  int session_end_fd() const override { return server_->session_end_fd(); }

 private:
  std::unique_ptr<MasterServer> server_;
};

std::unique_ptr<RendezvousConnection> Connect(const NetworkRendezvousOptions& options) {
  GrpcRendezvousOptions grpc_options;
  grpc_options.endpoint = options.endpoint;
  grpc_options.run_id = options.run_id;
  grpc_options.token = options.token;
  grpc_options.settings = options.settings;
  grpc_options.heartbeat_timeout = options.heartbeat_timeout;
  grpc_options.tls = options.tls;
  return std::make_unique<GrpcRendezvous>(grpc_options);
}

absl::StatusOr<std::unique_ptr<HostedMaster>> HostMaster(const HostedMasterOptions& options) {
  MasterOptions master_options;
  master_options.host = options.host;
  master_options.port = options.port;
  master_options.token = options.token;
  master_options.store_timeout = options.store_timeout;
  master_options.tls = options.tls;
  if (!options.only_run_id.empty()) master_options.only_run_id = options.only_run_id;
  absl::StatusOr<std::unique_ptr<MasterServer>> server = MasterServer::Start(master_options);
  if (!server.ok()) return server.status();
  return std::unique_ptr<HostedMaster>(new GrpcHostedMaster(std::move(*server)));
}

}  // namespace
}  // namespace ddprun

extern "C" void ddprun_network_plugin_v1(ddprun::NetworkPlugin* plugin) {
  ddprun::RouteGrpcLogsToSpdlog();
  plugin->connect = &ddprun::Connect;
  plugin->host_master = &ddprun::HostMaster;
}
