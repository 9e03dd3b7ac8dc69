#pragma once
// The Rendezvous service: one Session stream per agent (SessionReactor), whose messages go to
// MasterState and whose answers come back from it. Writes are queued, one in flight.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ddprun/v1/rendezvous.grpc.pb.h"
#include "rendezvous/master_state.h"
#include "rendezvous/wire.h"
#include "rendezvous/write_queue.h"

namespace ddprun {

/// One agent's Session stream. Writes are queued: at most one is in flight.
class SessionReactor : public grpc::ServerBidiReactor<v1::AgentMessage, v1::MasterMessage> {
 public:
  SessionReactor(MasterState* master, std::string peer)
      : master_(master), id_(master->NewSessionId()), peer_(std::move(peer)) {
    if (absl::Status opened = master_->OnSessionOpened(this); !opened.ok()) {
      FinishOnce(ToGrpcStatus(opened));
      return;
    }
    StartRead(&in_);
  }

  SessionId id() const { return id_; }
  /// Where the agent's connection comes from, as gRPC names it ("ipv4:10.0.0.2:41234").
  const std::string& peer() const { return peer_; }
  // The run this session joined; written and read only under the master's mutex.
  std::string run_id;
  bool joined = false;
  // The master dropped it (it went silent): what still arrives on it is refused, so that
  // its session id never enters the rules again.
  bool evicted = false;
  // When it was last told how its round gathers (Heartbeat.want_gathering): at most once a
  // second, whatever a client asks, so that its answers cannot pile up unread.
  absl::Time gathering_told = absl::InfinitePast();

  /// Ends the stream with `status` once the queued messages are written.
  void Close(const grpc::Status& status) {
    if (std::optional<grpc::Status> now = writes_.CloseAfterWrites(status)) FinishOnce(*now);
  }

  void Send(v1::MasterMessage message) {
    if (const v1::MasterMessage* first = writes_.Push(std::move(message))) StartWrite(first);
  }

 private:
  void OnReadDone(bool ok) override {
    if (!ok) {  // the agent closed its side, or the connection broke
      master_->OnSessionClosed(this);
      FinishOnce(grpc::Status::OK);
      return;
    }
    if (absl::Status s = master_->OnAgentMessage(this, in_); !s.ok()) {
      master_->OnSessionClosed(this);
      FinishOnce(ToGrpcStatus(s));
      return;
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    auto next = writes_.Done(ok);
    if (next.write != nullptr) StartWrite(next.write);
    if (next.close) FinishOnce(*next.close);
  }

  void OnDone() override {
    master_->OnSessionClosed(this);
    delete this;
  }

  void FinishOnce(const grpc::Status& status) {
    if (writes_.Finish()) Finish(status);
  }

  MasterState* master_;
  const SessionId id_;
  const std::string peer_;
  v1::AgentMessage in_;
  WriteQueue<v1::MasterMessage, grpc::Status> writes_;
};

/// The Rendezvous service, one SessionReactor per Session call.
std::unique_ptr<grpc::Service> MakeRendezvousService(MasterState* master);

}  // namespace ddprun
