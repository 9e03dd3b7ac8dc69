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
  bool RunGoesOn(const std::string& run_id) const override { return server_->RunGoesOn(run_id); }
  int session_end_fd() const override { return server_->session_end_fd(); }
  void AdoptConnection(int listen_fd, int fd) override { server_->AdoptConnection(listen_fd, fd); }

 private:
  std::unique_ptr<MasterServer> server_;
};

std::unique_ptr<RendezvousConnection> Connect(const NetworkRendezvousOptions& options) {
  return std::make_unique<GrpcRendezvous>(options);
}

absl::StatusOr<std::unique_ptr<HostedMaster>> HostMaster(const MasterOptions& options) {
  absl::StatusOr<std::unique_ptr<MasterServer>> server = MasterServer::Start(options);
  if (!server.ok()) return server.status();
  return std::unique_ptr<HostedMaster>(new GrpcHostedMaster(std::move(*server)));
}

}  // namespace
}  // namespace ddprun

extern "C" void ddprun_network_plugin_v1(ddprun::NetworkPlugin* plugin) {
  ddprun::RouteGrpcLogsToSpdlog();
  ddprun::DisableMutexDeadlockDetection();  // the agent's own code holds no absl::Mutex
  plugin->connect = &ddprun::Connect;
  plugin->host_master = &ddprun::HostMaster;
}
