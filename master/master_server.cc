#include "master/master_server.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "master/admin_service.h"
#include "master/master_state.h"
#include "master/session_service.h"
#include "rpc/grpc_serving.h"
#include "rpc/store_service.h"

namespace ddprun {

void DisableMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

MasterServer::MasterServer(std::unique_ptr<MasterState> state,
                           std::vector<std::unique_ptr<grpc::Service>> services,
                           std::unique_ptr<GrpcServing> serving)
    : state_(std::move(state)),
      services_(std::move(services)),
      serving_(std::move(serving)),
      port_(serving_->port()) {}

MasterServer::~MasterServer() { Shutdown(absl::Seconds(1)); }

int MasterServer::port() const { return port_; }

int MasterServer::SessionCount(const std::string& run_id) const {
  return state_->SessionCount(run_id);
}

bool MasterServer::RunGoesOn(const std::string& run_id) const {
  // A master shut down serves nobody any more (an elected leader that stepped down).
  return !shut_down_ && state_->RunGoesOn(run_id);
}

int MasterServer::session_end_fd() const { return state_->session_end_fd(); }

int MasterServer::PendingStoreReads() const { return state_->PendingStoreReads(); }

absl::StatusOr<std::unique_ptr<MasterServer>> MasterServer::Start(const MasterOptions& options) {
  auto state = std::make_unique<MasterState>(options);
  std::vector<std::unique_ptr<grpc::Service>> services;
  services.push_back(MakeRendezvousService(state.get()));
  services.push_back(MakeAdminService(state.get()));
  services.push_back(MakeStoreService(state.get()));
  GrpcServingOptions serve;
  serve.host = options.host;
  serve.port = options.port;
  serve.adopt_connections = options.adopt_connections;
  serve.tls = options.tls;
  serve.handshake_timeout = options.limits.handshake_timeout;
  serve.max_streams_per_connection = options.limits.max_streams_per_connection;
  serve.memory_bytes = options.limits.grpc_memory_bytes;
  std::vector<grpc::Service*> registered;
  for (auto& service : services) registered.push_back(service.get());
  absl::StatusOr<std::unique_ptr<GrpcServing>> serving = GrpcServing::Start(serve, registered);
  if (!serving.ok()) return serving.status();
  state->StartTicker();
  return std::unique_ptr<MasterServer>(
      new MasterServer(std::move(state), std::move(services), std::move(*serving)));
}

absl::StatusOr<v1::StatusReply> MasterServer::Status(const std::string& run_id, bool lists) {
  return state_->Status(run_id, lists);
}

void MasterServer::AdoptConnection(int listen_fd, int fd) { serving_->Adopt(listen_fd, fd); }

void MasterServer::Shutdown(absl::Duration grace) {
  if (serving_ == nullptr) return;
  shut_down_ = true;
  serving_->StopAccepting();
  state_->AbortStoreReads();
  serving_->Shutdown(grace);
  serving_.reset();
  state_->StopTicker();
}

}  // namespace ddprun
