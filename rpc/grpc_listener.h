#pragma once
// The accept loop of ddprun's gRPC servers (the master's, a Store alone's), in place of
// gRPC's: gRPC 1.51's listener stops accepting for good after one EMFILE (grpc/grpc#16058),
// which left a master deaf after a burst of idle connections. This one sheds a connection it
// has no descriptor for, says so, and goes on; each connection it accepts is handed to gRPC
// (GrpcServing::Adopt).

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace ddprun {

class GrpcListener {
 public:
  /// Called with each accepted connection and the socket it came on.
  using Handoff = std::function<void(int listen_fd, int fd)>;

  /// Binds `host`:`port` (see ListenTcp); accepts nothing until Start.
  static absl::StatusOr<std::unique_ptr<GrpcListener>> Listen(const std::string& host, int port);
  ~GrpcListener();  // stops accepting and closes the sockets

  int port() const { return port_; }
  void Start(Handoff handoff);

 private:
  GrpcListener(std::vector<UniqueFd> sockets, UniqueFd stop);
  void Run();

  std::vector<UniqueFd> sockets_;
  UniqueFd stop_;     // an eventfd: readable when the thread must end
  UniqueFd reserve_;  // see AcceptOrShed
  int port_ = 0;
  Handoff handoff_;
  std::thread thread_;
};

}  // namespace ddprun
