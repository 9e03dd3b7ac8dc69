#pragma once
// The Rendezvous service: one Session stream per agent (SessionReactor), whose messages go to
// MasterState and whose answers come back from it. Writes are queued, one in flight.

#include <grpcpp/grpcpp.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "ddprun/v1/rendezvous.grpc.pb.h"
#include "rendezvous/master_state.h"
#include "rendezvous/wire.h"

namespace ddprun {

/// One agent's Session stream. Writes are queued: at most one is in flight.
class SessionReactor : public grpc::ServerBidiReactor<v1::AgentMessage, v1::MasterMessage> {
 public:
  SessionReactor(MasterState* master, std::string peer)
      : master_(master), id_(master->NewSessionId()), peer_(std::move(peer)) {
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

  /// Ends the stream with `status` once the queued messages are written.
  void Close(const grpc::Status& status) {
    {
      absl::MutexLock lock(&write_mu_);
      if (finished_ || close_status_) return;
      if (writing_) {
        close_status_ = status;
        return;
      }
    }
    FinishOnce(status);
  }

  void Send(v1::MasterMessage message) {
    {
      absl::MutexLock lock(&write_mu_);
      if (finished_) return;
      queue_.push_back(std::move(message));
      if (writing_) return;
      writing_ = true;
    }
    StartWrite(&queue_.front());
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
    bool more = false;
    std::optional<grpc::Status> close;
    {
      absl::MutexLock lock(&write_mu_);
      queue_.pop_front();
      more = ok && !queue_.empty() && !finished_;
      writing_ = more;
      if (!more) close.swap(close_status_);
    }
    if (more) StartWrite(&queue_.front());
    if (close) FinishOnce(*close);
  }

  void OnDone() override {
    master_->OnSessionClosed(this);
    delete this;
  }

  void FinishOnce(const grpc::Status& status) {
    {
      absl::MutexLock lock(&write_mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(status);
  }

  MasterState* master_;
  const SessionId id_;
  const std::string peer_;
  v1::AgentMessage in_;
  absl::Mutex write_mu_;
  std::deque<v1::MasterMessage> queue_;  // front() is in flight while writing_
  bool writing_ = false;
  bool finished_ = false;
  std::optional<grpc::Status> close_status_;  // Close() waiting for the queue to drain
};

/// The Rendezvous service, one SessionReactor per Session call.
std::unique_ptr<grpc::Service> MakeRendezvousService(MasterState* master);

}  // namespace ddprun
