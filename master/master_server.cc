#include "master/master_server.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/listen_socket.h"
#include "master/admin_service.h"
#include "master/master_listener.h"
#include "master/master_state.h"
#include "master/session_service.h"
#include "master/store_service.h"

namespace ddprun {

void DisableMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

MasterServer::MasterServer(std::unique_ptr<MasterState> impl) : impl_(std::move(impl)) {}

MasterServer::~MasterServer() { Shutdown(absl::Seconds(1)); }

int MasterServer::port() const { return impl_->port; }

int MasterServer::SessionCount(const std::string& run_id) const {
  return impl_->SessionCount(run_id);
}

bool MasterServer::RunGoesOn(const std::string& run_id) const { return impl_->RunGoesOn(run_id); }

int MasterServer::session_end_fd() const { return impl_->session_end_fd(); }

int MasterServer::PendingStoreReads() const { return impl_->PendingStoreReads(); }

absl::StatusOr<std::unique_ptr<MasterServer>> MasterServer::Start(const MasterOptions& options) {
  auto impl = std::make_unique<MasterState>(options);
  if (!options.store_only) {
    impl->services.push_back(MakeRendezvousService(impl.get()));
    impl->services.push_back(MakeAdminService(impl.get()));
  }
  impl->services.push_back(MakeStoreService(impl.get()));
  grpc::ServerBuilder builder;
  const std::string address = HostPort(options.host, options.port);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (options.tls.enabled()) {
    grpc::SslServerCredentialsOptions ssl(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = options.tls.ca_pem;
    ssl.pem_key_cert_pairs.push_back({options.tls.key_pem, options.tls.cert_pem});
    credentials = grpc::SslServerCredentials(ssl);
  }
  // Connections always come through the acceptor: from whoever shares the port with the
  // master (adopt_connections), else from the master's own listener (master_listener.h).
  impl->acceptor = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, credentials);
  impl->port = options.port;
  if (!options.adopt_connections) {
    absl::StatusOr<std::unique_ptr<MasterListener>> listener =
        MasterListener::Listen(options.host, options.port);
    if (!listener.ok()) return listener.status();
    impl->listener = std::move(*listener);
    impl->port = impl->listener->port();
  }
  for (auto& service : impl->services) builder.RegisterService(service.get());
  // Agents detect a dead master with HTTP/2 keepalive pings; accept them often.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Bounds on what one client can hold: a connection that has not finished its handshake
  // (TLS, or HTTP/2's settings) in time is closed, an idle one after 10 minutes (a client
  // reconnects by itself), and one connection carries at most so many streams.
  builder.AddChannelArgument(
      GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
      static_cast<int>(absl::ToInt64Milliseconds(options.limits.handshake_timeout)));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 10 * 60'000);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             options.limits.max_streams_per_connection);
  grpc::ResourceQuota quota("ddprun-master");
  quota.Resize(static_cast<size_t>(options.limits.grpc_memory_bytes));
  builder.SetResourceQuota(quota);
  // A Store value may be 8 MiB (gRPC's default limit is 4 MiB); multi_set carries several.
  builder.SetMaxReceiveMessageSize(64 * 1024 * 1024);
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr) {
    return absl::InternalError(absl::StrCat("cannot start the gRPC server for ", address));
  }
  if (impl->listener) {
    impl->listener->Start(
        [state = impl.get()](int listen_fd, int fd) { state->Adopt(listen_fd, fd); });
  }
  impl->StartTicker();
  return std::unique_ptr<MasterServer>(new MasterServer(std::move(impl)));
}

absl::StatusOr<v1::StatusReply> MasterServer::Status(const std::string& run_id, bool lists) {
  return impl_->Status(run_id, lists);
}

void MasterServer::AdoptConnection(int listen_fd, int fd) { impl_->Adopt(listen_fd, fd); }

void MasterServer::Shutdown(absl::Duration grace) {
  impl_->listener.reset();  // accepts nothing more
  {
    absl::MutexLock lock(&impl_->adopt_mu);
    impl_->adopt_closed = true;
  }
  if (impl_->server == nullptr) return;
  impl_->AbortStoreReads();
  impl_->server->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  impl_->StopTicker();
  impl_->server->Wait();
  impl_->server.reset();
}

}  // namespace ddprun
