#include "rpc/grpc_serving.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/listen_socket.h"

namespace ddprun {

absl::StatusOr<std::unique_ptr<GrpcServing>> GrpcServing::Start(
    const GrpcServingOptions& options, const std::vector<grpc::Service*>& services) {
  std::unique_ptr<GrpcServing> serving(new GrpcServing());
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
  // Connections always come through the acceptor: from whoever shares the port
  // (adopt_connections), else from the server's own listener (grpc_listener.h).
  serving->acceptor_ = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, credentials);
  serving->port_ = options.port;
  if (!options.adopt_connections) {
    absl::StatusOr<std::unique_ptr<GrpcListener>> listener =
        GrpcListener::Listen(options.host, options.port);
    if (!listener.ok()) return listener.status();
    serving->listener_ = std::move(*listener);
    serving->port_ = serving->listener_->port();
  }
  for (grpc::Service* service : services) builder.RegisterService(service);
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
      static_cast<int>(absl::ToInt64Milliseconds(options.handshake_timeout)));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 10 * 60'000);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_streams_per_connection);
  grpc::ResourceQuota quota("ddprun-master");
  quota.Resize(static_cast<size_t>(options.memory_bytes));
  builder.SetResourceQuota(quota);
  // A Store value may be 8 MiB (gRPC's default limit is 4 MiB); multi_set carries several.
  builder.SetMaxReceiveMessageSize(64 * 1024 * 1024);
  serving->server_ = builder.BuildAndStart();
  if (serving->server_ == nullptr) {
    return absl::InternalError(absl::StrCat("cannot start the gRPC server for ", address));
  }
  if (serving->listener_) {
    serving->listener_->Start(
        [s = serving.get()](int listen_fd, int fd) { s->Adopt(listen_fd, fd); });
  }
  return serving;
}

GrpcServing::~GrpcServing() { Shutdown(absl::Seconds(1)); }

void GrpcServing::Adopt(int listen_fd, int fd) {
  absl::MutexLock lock(&adopt_mu_);
  if (acceptor_ == nullptr || adopt_closed_) {
    ::close(fd);
    return;
  }
  grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters connection;
  connection.listener_fd = listen_fd;
  connection.fd = fd;
  acceptor_->HandleNewConnection(&connection);
}

void GrpcServing::StopAccepting() {
  listener_.reset();
  absl::MutexLock lock(&adopt_mu_);
  adopt_closed_ = true;
}

void GrpcServing::Shutdown(absl::Duration grace) {
  StopAccepting();
  if (server_ == nullptr) return;
  server_->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  server_->Wait();
  server_.reset();
}

}  // namespace ddprun
