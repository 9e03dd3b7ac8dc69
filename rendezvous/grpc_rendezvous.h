#pragma once
// GrpcRendezvous: the agent's connection to a rendezvous master over gRPC, one Session
// stream at a time. gRPC's threads only convert messages and queue them as events; the
// agent's event loop takes them from the queue's eventfd.

#include <memory>
#include <string>

#include "rendezvous/network_plugin.h"
#include "rendezvous/rendezvous_connection.h"

namespace ddprun {

class GrpcRendezvous : public RendezvousConnection {
 public:
  explicit GrpcRendezvous(NetworkRendezvousOptions options);
  ~GrpcRendezvous() override;

  int event_fd() const override { return events_.fd(); }
  std::vector<RendezvousEvent> TakeEvents() override { return events_.Take(); }
  void Join(const NodeInfo& node) override;
  void ReportFailure(int64_t round, std::vector<ReportedFailure> failures) override;
  void ReportSuccess(int64_t round) override;
  void Heartbeat() override;
  void Reconnect() override;
  std::string store_addr() const override { return options_.endpoint; }
  absl::Duration heartbeat_interval() const override {
    return options_.settings.keep_alive_interval;
  }

  class Stream;

 private:
  NetworkRendezvousOptions options_;
  EventQueue events_;
  struct Channel;
  std::unique_ptr<Channel> channel_;
  std::unique_ptr<Stream> stream_;
};

}  // namespace ddprun
