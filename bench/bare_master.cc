// ddprun-bare-master: the floor for bench/scale.py and bench/store_bench.cc. It speaks the
// rendezvous protocol to ddprun-loadgen with nothing but what a round needs: a gRPC callback
// server, one mutex, a list of streams. When max_nodes have joined it writes each one an assignment
// (ranks in order of arrival); a failure report writes every member a stop order, and the rejoins
// close the next round. No validation, deadlines, heartbeats, store or ordering rules: the
// difference between it and ddprun-master, with the same load generator in the same run,
// is what ddprun's own rules and bookkeeping cost. Its Store answers NumKeys at once: a
// plain gRPC unary round trip, the floor of a Store call.

#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/synchronization/mutex.h"
#include "ddprun/v1/rendezvous.grpc.pb.h"
#include "ddprun/v1/store.grpc.pb.h"
#include "master/master_server.h"

namespace ddprun {
namespace {

namespace pb = ::ddprun::v1;

class BareMaster;

class BareStream : public grpc::ServerBidiReactor<pb::AgentMessage, pb::MasterMessage> {
 public:
  explicit BareStream(BareMaster* master) : master_(master) { StartRead(&in_); }

  void Send(pb::MasterMessage message) {
    {
      absl::MutexLock lock(&mu_);
      queue_.push_back(std::move(message));
      if (queue_.size() > 1) return;  // the one in flight starts the next
    }
    StartWrite(&queue_.front());
  }

 private:
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override {
    bool more = false;
    {
      absl::MutexLock lock(&mu_);
      queue_.pop_front();
      more = ok && !queue_.empty();
    }
    if (more) StartWrite(&queue_.front());
  }
  void OnDone() override;

  BareMaster* master_;
  pb::AgentMessage in_;
  absl::Mutex mu_;
  std::deque<pb::MasterMessage> queue_;
};

class BareMaster : public pb::Rendezvous::CallbackService {
 public:
  grpc::ServerBidiReactor<pb::AgentMessage, pb::MasterMessage>* Session(
      grpc::CallbackServerContext*) override {
    return new BareStream(this);
  }

  // Sends under the lock, as ddprun's master dispatches under its own: a stream that ends
  // (Forget) cannot be written to afterwards.
  void OnMessage(BareStream* stream, const pb::AgentMessage& message) {
    absl::MutexLock lock(&mu_);
    if (message.has_report() && !message.report().succeeded()) {
      pb::MasterMessage stop;
      stop.mutable_stop()->set_reason(pb::StopOrder::WORKER_FAILED);
      ++restarts_;
      for (BareStream* s : members_) s->Send(stop);
      return;
    }
    if (!message.has_join()) return;  // heartbeats, successes
    if (members_.empty()) size_ = message.join().settings().max_nodes();
    joined_.push_back(stream);
    local_world_size_ = message.join().local_world_size();
    if (static_cast<int>(joined_.size()) < size_) return;
    members_.swap(joined_);
    joined_.clear();
    ++round_;
    const int n = static_cast<int>(members_.size());
    for (int rank = 0; rank < n; ++rank) {
      pb::MasterMessage assign;
      pb::RoundAssignment* a = assign.mutable_assignment();
      a->set_round(round_);
      a->set_restart_count(restarts_);
      a->set_group_rank(rank);
      a->set_group_world_size(n);
      a->set_base_rank(rank * local_world_size_);
      a->set_world_size(n * local_world_size_);
      a->set_master_addr("127.0.0.1");
      a->set_master_port(29500);
      members_[rank]->Send(std::move(assign));
    }
  }

  // A stream ended: the floor does not handle membership, so the run is over.
  void Forget() {
    absl::MutexLock lock(&mu_);
    joined_.clear();
    members_.clear();
  }

 private:
  absl::Mutex mu_;
  int size_ = 0;
  int local_world_size_ = 1;
  int64_t round_ = -1;
  int restarts_ = 0;
  std::vector<BareStream*> joined_;   // waiting for the next round
  std::vector<BareStream*> members_;  // the current round
};

class BareStore : public pb::Store::CallbackService {
  grpc::ServerUnaryReactor* NumKeys(grpc::CallbackServerContext* context, const pb::NumKeysRequest*,
                                    pb::NumKeysResponse*) override {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

void BareStream::OnDone() {
  master_->Forget();
  delete this;
}

void BareStream::OnReadDone(bool ok) {
  if (!ok) {
    Finish(grpc::Status::OK);
    return;
  }
  master_->OnMessage(this, in_);
  StartRead(&in_);
}

}  // namespace
}  // namespace ddprun

int main(int argc, char** argv) {
  ddprun::DisableMutexDeadlockDetection();
  std::string host = "127.0.0.1";
  int port = 0;
  CLI::App app{"ddprun-bare-master: the floor a rendezvous master is compared with"};
  app.add_option("--host", host, "address to listen on");
  app.add_option("--port", port, "port to listen on")->required();
  CLI11_PARSE(app, argc, argv);
  ddprun::BareMaster service;
  ddprun::BareStore store;
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort(host + ":" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &bound);
  builder.RegisterService(&service);
  builder.RegisterService(&store);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound == 0) {
    std::fprintf(stderr, "ddprun-bare-master: cannot listen on %s:%d\n", host.c_str(), port);
    return 1;
  }
  server->Wait();  // until killed
  return 0;
}
