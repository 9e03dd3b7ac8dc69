#pragma once
// GrpcRendezvous: the agent's connection to a rendezvous master over gRPC, one Session
// stream at a time. gRPC's threads only convert messages and queue them as events; the
// agent's event loop takes them from the queue's eventfd.
//
// Its parts are public so that bench/loadgen.cc can simulate thousands of agents with the
// agent's own client code: the channel an agent opens and one Session stream.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "ddprun/v1/rendezvous.grpc.pb.h"
#include "net/network_plugin.h"
#include "rendezvous/rendezvous_connection.h"
#include "rpc/grpc_channel.h"
#include "rpc/write_queue.h"

namespace ddprun {

/// The channel arguments an agent's connection to the master uses (keepalive, reconnect).
grpc::ChannelArguments AgentChannelArguments(const NetworkRendezvousOptions& options);
/// Plain, or TLS with the agent's certificate when options.tls is enabled.
std::shared_ptr<grpc::ChannelCredentials> AgentCredentials(const NetworkRendezvousOptions& options);

/// One Session stream. Writes are queued with one in flight; every message from the master,
/// and the stream's end, reaches `on_event` on a gRPC thread.
class SessionStream : public grpc::ClientBidiReactor<v1::AgentMessage, v1::MasterMessage> {
 public:
  using OnEvent = std::function<void(RendezvousEvent)>;
  /// Opens the stream, waiting for the master if it is not up yet.
  SessionStream(v1::Rendezvous::Stub* stub, std::string endpoint, OnEvent on_event);
  /// Cancels the stream and waits until gRPC is done with it.
  ~SessionStream() override;

  void Send(v1::AgentMessage message);
  /// Waits up to `timeout` for what was sent to go out (before the agent exits).
  void AwaitWritten(absl::Duration timeout) { writes_.AwaitWritten(timeout); }
  /// From now on the stream's end is expected, not news: no kLost or kRefused event.
  void Abandon();

 private:
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  const std::string endpoint_;
  const OnEvent on_event_;
  grpc::ClientContext context_;
  v1::MasterMessage in_;
  WriteQueue<v1::AgentMessage> writes_;
  absl::Mutex mu_;
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

class GrpcRendezvous : public RendezvousConnection {
 public:
  /// `events`: where its events go (an ElectedRendezvous's, which owns it); null: a queue of
  /// its own.
  explicit GrpcRendezvous(NetworkRendezvousOptions options, EventQueue* events = nullptr);
  ~GrpcRendezvous() override;

  int event_fd() const override { return events_->fd(); }
  std::vector<RendezvousEvent> TakeEvents() override { return events_->Take(); }
  void Join(const NodeInfo& node) override;
  void ReportFailure(int64_t round, std::vector<ReportedFailure> failures) override;
  void ReportSuccess(int64_t round) override;
  void ReportStopped(int64_t round) override;
  void Heartbeat() override;
  void ReportStacks(int64_t round, int world_size, const std::string& cause,
                    const std::vector<RankStack>& stacks) override;
  void Leave(const std::string& reason) override;
  void Reconnect() override;
  /// Points this connection at another master (an elected run's new leader): the current
  /// stream is dropped without a word (its master may still serve another leader's round),
  /// a new one opens there. The last report stays, for the resume that follows.
  void Retarget(const std::string& endpoint);
  /// Connected: asks the master how the round gathers. Not: a TCP probe of its address, on
  /// a thread of its own (at most one at a time, bounded by kProbeTimeout), says who answers.
  void CheckProgress() override;
  void ReportRestart(const RestartSplit& split) override;
  void ReportOutage(int64_t round, absl::Duration lost) override;
  /// A TCP connection to `store`, on the probe thread (one probe at a time: a check asked
  /// while one is out is dropped; the rules ask again), bounded by kReachTimeout.
  void CheckReach(const std::string& store) override;
  std::string store_addr() const override { return options_.endpoint; }
  absl::Duration heartbeat_interval() const override {
    return options_.settings.keep_alive_interval;
  }

 private:
  std::unique_ptr<SessionStream> OpenStream();
  void Connect();
  void ProbeAddress(const std::string& endpoint, std::shared_ptr<grpc::Channel> channel);
  // Runs `probe` on the probe thread unless one is out; false if one is.
  bool StartProbe(std::function<void()> probe);
  // Sends a report, and keeps it: a resume on a new stream sends it again, since the old
  // stream may have lost it with the master.
  void SendReport(int64_t round, v1::AgentMessage report);

  static constexpr absl::Duration kProbeTimeout = absl::Seconds(2);
  // A host on the job's network answers a connection in well under a second; a cut-off
  // node must decide before the master's keep-alive window gives its place away.
  static constexpr absl::Duration kReachTimeout = absl::Seconds(1);

  NetworkRendezvousOptions options_;
  EventQueue own_events_;
  EventQueue* const events_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Rendezvous::Stub> stub_;
  std::unique_ptr<SessionStream> stream_;
  std::unique_ptr<QuickConnect> quick_connect_;  // the first second's tries (grpc_channel.h)
  std::thread probe_;
  std::atomic<bool> probing_{false};
  std::optional<v1::AgentMessage> last_report_;  // SendReport's, about round last_report_round_
  int64_t last_report_round_ = -1;
};

/// Whether a ddprun rendezvous master answers at options.endpoint within `timeout`: OK
/// when gRPC connects there; else Unavailable, saying who answers instead (endpoint_probe.h).
absl::Status ProbeMaster(const NetworkRendezvousOptions& options, absl::Duration timeout);

}  // namespace ddprun
