#pragma once
// What the master's tests share: one agent's Session driven synchronously, and a fixture
// that starts a master on loopback with plain gRPC clients.

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ddprun/v1/rendezvous.grpc.pb.h"
#include "ddprun/v1/store.grpc.pb.h"
#include "master/master_server.h"
#include "rendezvous/run_access.h"
#include "rpc/wire.h"

namespace ddprun {
namespace master_testing {

namespace pb = ::ddprun::v1;

/// `running` as an agent sends it back in a resume (rpc/wire.h's conversion of a join).
inline pb::RoundAssignment ResumeOnTheWire(const Assignment& running) {
  NodeInfo node;
  node.resume = running;
  return ::ddprun::JoinMessage(node, "", "", RendezvousSettings()).join().resume();
}

inline bool WaitReadable(int fd, absl::Duration timeout) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) == 1;
}

// One agent's Session, read and written synchronously, every wait bounded by a deadline.
class TestSession {
 public:
  TestSession(const std::shared_ptr<grpc::Channel>& channel,
              absl::Duration deadline = absl::Seconds(20))
      : stub_(pb::Rendezvous::NewStub(channel)) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    stream_ = stub_->Session(&context_);
  }
  bool Join(const std::string& run_id, const std::string& host, int min_nodes, int max_nodes,
            int max_restarts = 0, const std::string& token = "", int version = 2,
            absl::Duration keep_alive = absl::Seconds(5)) {
    return stream_->Write(
        JoinMessage(run_id, host, min_nodes, max_nodes, max_restarts, token, version, keep_alive));
  }
  static pb::AgentMessage JoinMessage(const std::string& run_id, const std::string& host,
                                      int min_nodes, int max_nodes, int max_restarts = 0,
                                      const std::string& token = "", int version = 2,
                                      absl::Duration keep_alive = absl::Seconds(5)) {
    pb::AgentMessage message;
    pb::Join* join = message.mutable_join();
    join->set_version(static_cast<pb::ProtocolVersion>(version));
    join->set_run_id(run_id);
    join->set_token(token);
    join->mutable_node()->set_host(host);
    join->mutable_node()->set_addr(host + ".example");
    join->mutable_node()->set_pid(1);
    join->mutable_node()->set_incarnation("inc-" + host);
    join->set_local_world_size(2);
    join->set_node_rank_hint(-1);
    join->set_master_port(29500);
    RendezvousSettings settings;
    settings.min_nodes = min_nodes;
    settings.max_nodes = max_nodes;
    settings.max_restarts = max_restarts;
    settings.last_call_timeout = absl::Seconds(30);
    settings.keep_alive_interval = keep_alive;
    settings.keep_alive_max_attempt = 2;
    *join->mutable_settings() = ToWire(settings);
    return message;
  }
  bool Heartbeat() {
    pb::AgentMessage message;
    message.mutable_heartbeat();
    return stream_->Write(message);
  }
  bool ReportFailure(int64_t round, int rank) {
    pb::AgentMessage message;
    message.mutable_report()->set_round(round);
    pb::WorkerFailure* f = message.mutable_report()->add_failures();
    f->set_host("h");
    f->set_rank(rank);
    f->set_exit_code(3);
    return stream_->Write(message);
  }
  std::optional<pb::MasterMessage> Read() {
    pb::MasterMessage message;
    if (!stream_->Read(&message)) return std::nullopt;
    return message;
  }
  grpc::Status Close() {
    stream_->WritesDone();
    pb::MasterMessage ignored;
    while (stream_->Read(&ignored)) {
    }
    return stream_->Finish();
  }
  void Cancel() { context_.TryCancel(); }
  bool Write(const pb::AgentMessage& message) { return stream_->Write(message); }

 private:
  std::unique_ptr<pb::Rendezvous::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::AgentMessage, pb::MasterMessage>> stream_;
};

class MasterServerTest : public ::testing::Test {
 protected:
  void StartMaster(MasterOptions options = {}) {
    options.host = "127.0.0.1";
    auto master = MasterServer::Start(options);
    ASSERT_TRUE(master.ok()) << master.status();
    master_ = std::move(*master);
    channel_ = NewChannel();
  }
  std::shared_ptr<grpc::Channel> NewChannel() {
    grpc::ChannelArguments args;
    args.SetInt("ddprun.test.unique", ++channels_);  // one connection per simulated agent
    return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", master_->port()),
                                     grpc::InsecureChannelCredentials(), args);
  }
  static grpc::Status SetKey(pb::Store::Stub& store, const std::string& run_id,
                             const std::string& key, const std::string& value) {
    grpc::ClientContext c;
    pb::SetRequest set;
    set.set_run_id(run_id);
    set.set_key(key);
    set.set_value(value);
    pb::SetResponse r;
    return store.Set(WithDeadline(c), set, &r);
  }
  static grpc::ClientContext* WithDeadline(grpc::ClientContext& context) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    return &context;
  }

  // An agent holding a session in `run_id` (one node, one round), so that the master
  // serves the run's Store; it stays until the test ends.
  void HoldRun(const std::string& run_id, const std::string& token = "") {
    auto session = std::make_unique<TestSession>(NewChannel(), absl::Seconds(120));
    ASSERT_TRUE(session->Join(run_id, "holder", 1, 1, 0, token));
    auto assigned = session->Read();
    ASSERT_TRUE(assigned && assigned->has_assignment()) << "the run could not be joined";
    holders_.push_back(std::move(session));
  }

  std::unique_ptr<MasterServer> master_;
  std::shared_ptr<grpc::Channel> channel_;
  int channels_ = 0;
  std::vector<std::unique_ptr<TestSession>> holders_;  // last: they close before the master
};

}  // namespace master_testing
}  // namespace ddprun
