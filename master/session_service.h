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
#include "master/master_state.h"
#include "master/session.h"
#include "rpc/wire.h"
#include "rpc/write_queue.h"

namespace ddprun {

/// One agent's Session stream. Writes are queued: at most one is in flight.
class SessionReactor : public Session,
                       public grpc::ServerBidiReactor<v1::AgentMessage, v1::MasterMessage> {
 public:
  SessionReactor(MasterState* master, std::string peer)
      : Session(master->NewSessionId(), std::move(peer)), master_(master) {
    if (absl::Status opened = master_->OnSessionOpened(this); !opened.ok()) {
      FinishOnce(ToGrpcStatus(opened));
      return;
    }
    StartRead(&in_);
  }

  void Close(const grpc::Status& status) override {
    if (std::optional<grpc::Status> now = writes_.CloseAfterWrites(status)) FinishOnce(*now);
  }

  void Send(v1::MasterMessage message) override {
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
  v1::AgentMessage in_;
  WriteQueue<v1::MasterMessage, grpc::Status> writes_;
};

/// The Rendezvous service, one SessionReactor per Session call.
std::unique_ptr<grpc::Service> MakeRendezvousService(MasterState* master);

}  // namespace ddprun
