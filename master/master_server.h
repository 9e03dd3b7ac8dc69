#pragma once
// MasterServer: the rendezvous master over gRPC. It serves the Rendezvous service (one
// Session stream per agent, driving one RoundStateMachine per run id), the Admin service and
// the Store service (one KvStore per run id that agents joined). Hosted inside an agent
// (--standalone, or on the --rdzv-endpoint host) or alone as `ddprun-master`.
//
// Threads: gRPC's callback threads and one ticker thread that applies deadlines. All run
// state is guarded by one mutex; the state machines and stores are pure and never block.

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "master/master_options.h"

namespace grpc {
class Service;
}  // namespace grpc

namespace ddprun {

namespace v1 {
class StatusReply;  // admin.proto: what Status() answers (callers include admin.pb.h)
}  // namespace v1

class MasterState;
class GrpcServing;

class MasterServer {
 public:
  /// Binds and starts serving. An error names the address (and says so when it is in use).
  static absl::StatusOr<std::unique_ptr<MasterServer>> Start(const MasterOptions& options);
  ~MasterServer();

  /// The port it listens on.
  int port() const;
  /// How many agents hold a session in `run_id` now.
  int SessionCount(const std::string& run_id) const;
  /// RunGoesOn (master_state.h); false once the master is shut down.
  bool RunGoesOn(const std::string& run_id) const;
  /// Readable (an eventfd; read it to reset) whenever a session ends or a run ends.
  int session_end_fd() const;
  /// Blocking Store reads waiting for keys, across runs.
  int PendingStoreReads() const;
  /// With adopt_connections: serves the connection `fd` (its first bytes still unread),
  /// accepted on `listen_fd`; plaintext or TLS as the master's credentials say. Takes `fd`.
  void AdoptConnection(int listen_fd, int fd);
  /// The status of `run_id` (every run when it is empty), as `ddprun status` shows it;
  /// `lists`: with each run's nodes. NotFound for a run it does not hold.
  absl::StatusOr<v1::StatusReply> Status(const std::string& run_id, bool lists);
  /// Stops accepting, lets calls finish until `grace` has passed, then cancels the rest.
  void Shutdown(absl::Duration grace);

 private:
  MasterServer(std::unique_ptr<MasterState> state,
               std::vector<std::unique_ptr<grpc::Service>> services,
               std::unique_ptr<GrpcServing> serving);
  std::unique_ptr<MasterState> state_;
  std::vector<std::unique_ptr<grpc::Service>> services_;  // what serving_ serves
  std::unique_ptr<GrpcServing> serving_;                  // null once shut down
  std::atomic<bool> shut_down_{false};                    // read from other threads
  const int port_;
};

/// Turns off Abseil's mutex deadlock detection in this process. Debian's Abseil is built
/// without NDEBUG, so it is on by default, and then every Lock() also updates one global
/// lock graph under one global mutex: 4% of the master's CPU in a perf profile of a
/// 10,000-agent round. Called first by the binaries that serve the master; the tests keep
/// the detection.
void DisableMutexDeadlockDetection();

}  // namespace ddprun
