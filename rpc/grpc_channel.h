#pragma once
// What every client of a ddprun gRPC server sets on its channel: the agent's session to the
// master, and the worker SDK's Store client.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace ddprun {

/// A refused connection is retried after 100 ms (gRPC's least), backing off to 1 s; each
/// attempt keeps gRPC's default 20 s to complete.
void SetQuickReconnect(grpc::ChannelArguments& args);

/// Agents started together (the Slurm case) try before the agent that hosts the master
/// listens, and gRPC then waits at least 100 ms before its next try: a 2-agent launch took
/// 40-150 ms for a master that listened 20 ms in. For the channel's first second, QuickConnect
/// tries again on ddprun's own schedule (QuickConnectPauses) whenever the last try failed,
/// then leaves the channel to gRPC's back-off. A try waits for the one before it to end, so
/// a busy master is not sent a storm of abandoned attempts.
class QuickConnect {
 public:
  explicit QuickConnect(std::shared_ptr<grpc::Channel> channel);
  ~QuickConnect();  // stops at once

 private:
  void Run();

  std::shared_ptr<grpc::Channel> channel_;
  absl::Notification stop_;
  std::thread thread_;
};

/// The pauses between QuickConnect's looks at the channel: from 5 ms, 1.5x longer each
/// time, 1 s in all.
std::vector<absl::Duration> QuickConnectPauses();

}  // namespace ddprun
