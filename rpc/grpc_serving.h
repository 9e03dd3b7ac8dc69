#pragma once
// GrpcServing: a started gRPC server of ddprun's (the rendezvous master, or a Store alone),
// with the settings both need: TLS, keepalive, the bounds on what one client can hold, and
// connections that come through an acceptor, from ddprun's own listener (grpc_listener.h) or
// from whoever shares the port (an agent's TCPStore hands the master its gRPC connections).

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rendezvous/tls_config.h"
#include "rpc/grpc_listener.h"

namespace ddprun {

struct GrpcServingOptions {
  std::string host = "0.0.0.0";  // address to listen on
  int port = 0;                  // 0: the kernel picks one
  // No listening socket: connections come through Adopt from whoever listens on `port`.
  bool adopt_connections = false;
  TlsConfig tls;  // enabled: clients must show a certificate signed by tls.ca_pem
  // A connection whose TLS or HTTP/2 handshake has not finished by then is closed.
  absl::Duration handshake_timeout = absl::Seconds(60);
  int max_streams_per_connection = 65536;   // every stream of one connection
  int64_t memory_bytes = int64_t{1} << 30;  // gRPC's resource quota
};

class GrpcServing {
 public:
  /// Binds (unless adopt_connections) and serves `services`, which must outlive it. An
  /// error names the address (and says so when it is in use).
  static absl::StatusOr<std::unique_ptr<GrpcServing>> Start(
      const GrpcServingOptions& options, const std::vector<grpc::Service*>& services);
  ~GrpcServing();

  int port() const { return port_; }
  /// Serves connection `fd`, accepted on `listen_fd`; takes `fd`.
  void Adopt(int listen_fd, int fd);
  /// Accepts nothing more: a connection adopted from now on is closed.
  void StopAccepting();
  /// Lets calls finish until `grace` has passed, then cancels the rest; waits for them.
  void Shutdown(absl::Duration grace);

 private:
  GrpcServing() = default;

  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
  std::unique_ptr<GrpcListener> listener_;  // unless adopt_connections
  absl::Mutex adopt_mu_;
  // Set once shutting down: gRPC would leave an fd it is handed then open.
  bool adopt_closed_ ABSL_GUARDED_BY(adopt_mu_) = false;
};

}  // namespace ddprun
