#pragma once
// One agent's Session stream as the master's state sees it: who it is, which run it joined,
// and how to answer it. The gRPC stream behind it is session_service.h's SessionReactor;
// MasterState holds only this, so that the state and the service do not include each other.

#include <grpcpp/support/status.h>

#include <string>
#include <utility>

#include "absl/time/time.h"
#include "ddprun/v1/rendezvous.pb.h"
#include "rendezvous/round_state_machine.h"

namespace ddprun {

class Session {
 public:
  virtual ~Session() = default;

  SessionId id() const { return id_; }
  /// Where the agent's connection comes from, as gRPC names it ("ipv4:10.0.0.2:41234").
  const std::string& peer() const { return peer_; }

  /// Queues `message`; it is written after the ones before it.
  virtual void Send(v1::MasterMessage message) = 0;
  /// Ends the stream with `status` once the queued messages are written.
  virtual void Close(const grpc::Status& status) = 0;

  // The run this session joined; written and read only under the master's mutex.
  std::string run_id;
  bool joined = false;
  // The master dropped it (it went silent): what still arrives on it is refused, so that
  // its session id never enters the rules again.
  bool evicted = false;
  // When it was last told how its round gathers (Heartbeat.want_gathering): at most once a
  // second, whatever a client asks, so that its answers cannot pile up unread.
  absl::Time gathering_told = absl::InfinitePast();

 protected:
  Session(SessionId id, std::string peer) : id_(id), peer_(std::move(peer)) {}

 private:
  const SessionId id_;
  const std::string peer_;
};

}  // namespace ddprun
