#pragma once
// GrpcRendezvous: the agent's connection to a rendezvous master over gRPC, one Session
// stream at a time. gRPC's threads only convert messages and queue them as events; the
// agent's event loop takes them from the queue's eventfd.

#include <memory>
#include <string>

#include "rendezvous/rendezvous_connection.h"
#include "rendezvous/tls_config.h"

namespace ddprun {

struct GrpcRendezvousOptions {
  std::string endpoint;  // host:port of the master
  std::string run_id;
  std::string token;
  RendezvousSettings settings;
  absl::Duration heartbeat_timeout = absl::Seconds(5);  // see AgentConfig
  TlsConfig tls;
};

class GrpcRendezvous : public RendezvousConnection {
 public:
  explicit GrpcRendezvous(GrpcRendezvousOptions options);
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
  GrpcRendezvousOptions options_;
  EventQueue events_;
  struct Channel;
  std::unique_ptr<Channel> channel_;
  std::unique_ptr<Stream> stream_;
};

}  // namespace ddprun
