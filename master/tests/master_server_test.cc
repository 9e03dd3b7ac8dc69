// The gRPC master on loopback, driven by plain gRPC clients: what crosses the wire.

#include "master/master_server.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ddprun/v1/rendezvous.grpc.pb.h"
#include "ddprun/v1/store.grpc.pb.h"
#include "master/tests/master_test_support.h"
#include "net/grpc_rendezvous.h"
#include "rpc/wire.h"
#include "tests/support/child_process.h"
#include "tests/support/delay_proxy.h"
#include "tests/support/tcp_sockets.h"

namespace ddprun {
namespace {

using master_testing::MasterServerTest;
using master_testing::TestSession;
using master_testing::WaitReadable;
using ::testing::HasSubstr;
namespace pb = ::ddprun::v1;

// An agent that cannot tell its store's address leaves it to the master, which takes where
// the session comes from; on loopback that is no address for other nodes, so the host name
// the agent sends as a fallback is used, and without one the join is refused naming
// --local-addr (docs/environment.md#master_addr-master_port-and-the-store).
TEST_F(MasterServerTest, AnEmptyAddressIsTheFallbackOnLoopbackOrARefusal) {
  StartMaster();
  TestSession with_name(NewChannel()), without(NewChannel());
  pb::AgentMessage named = TestSession::JoinMessage("job", "node1", 1, 1);
  named.mutable_join()->mutable_node()->set_addr("");
  named.mutable_join()->mutable_node()->set_fallback_addr("node1.cluster");
  ASSERT_TRUE(with_name.Write(named));
  pb::AgentMessage bare = TestSession::JoinMessage("other", "node2", 1, 1);
  bare.mutable_join()->mutable_node()->set_addr("");
  ASSERT_TRUE(without.Write(bare));
  grpc::Status refused = without.Close();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("node2: no address that the other nodes can reach"));
  EXPECT_THAT(refused.error_message(), HasSubstr("127.0.0.1, a loopback address"));
  EXPECT_THAT(refused.error_message(), HasSubstr("--local-addr=ADDRESS"));
  auto m = with_name.Read();
  ASSERT_TRUE(m && m->has_assignment());
  EXPECT_EQ(m->assignment().master_addr(), "node1.cluster");
}

TEST_F(MasterServerTest, TwoAgentsGetRanksOfOneRound) {
  StartMaster();
  TestSession a(NewChannel()), b(NewChannel());
  ASSERT_TRUE(a.Join("job", "node1", 2, 2));
  ASSERT_TRUE(b.Join("job", "node2", 2, 2));
  auto ma = a.Read();
  auto mb = b.Read();
  ASSERT_TRUE(ma && ma->has_assignment());
  ASSERT_TRUE(mb && mb->has_assignment());
  EXPECT_EQ(ma->assignment().group_rank(), 0);
  EXPECT_EQ(mb->assignment().group_rank(), 1);
  EXPECT_EQ(mb->assignment().base_rank(), 2);
  EXPECT_EQ(ma->assignment().world_size(), 4);
  EXPECT_EQ(mb->assignment().master_addr(), "node1.example");
  EXPECT_TRUE(a.Close().ok());
}

// Nagle's algorithm held each small message for the peer's delayed ACK, ~40 ms: a restart of
// 2 agents took 45 ms instead of 7. Both ends of every connection send at once.
TEST_F(MasterServerTest, EveryConnectionSendsSmallMessagesAtOnce) {
  StartMaster();
  TestSession a(NewChannel()), b(NewChannel());
  ASSERT_TRUE(a.Join("job", "node1", 2, 2));
  ASSERT_TRUE(b.Join("job", "node2", 2, 2));
  ASSERT_TRUE(a.Read().has_value());
  ASSERT_TRUE(b.Read().has_value());
  const testing::TcpConnectionsOnPort sockets = testing::TcpConnectionsOn(master_->port());
  EXPECT_GE(sockets.accepted, 2);
  EXPECT_EQ(sockets.accepted_without_nodelay, 0);
  EXPECT_GE(sockets.connected, 2);
  EXPECT_EQ(sockets.connected_without_nodelay, 0);
}

// A stream that breaks because its agent is gone (nothing listens any more where it served
// its workers' store) is told to the others at once; the master does not hold its place.
TEST_F(MasterServerTest, ABrokenStreamWhoseAgentIsGoneIsToldToTheOthersAtOnce) {
  StartMaster();
  TestSession a(NewChannel()), b(NewChannel());
  ASSERT_TRUE(a.Join("job", "node1", 1, 2));
  pb::AgentMessage gone = TestSession::JoinMessage("job", "node2", 1, 2);
  gone.mutable_join()->mutable_node()->set_addr("127.0.0.1");
  gone.mutable_join()->set_master_port(testing::FreeLoopbackPort());  // its store: closed
  ASSERT_TRUE(b.Write(gone));
  // min 1 of max 2: the first round waits for last call unless max is reached: it is.
  ASSERT_TRUE(a.Read()->has_assignment());
  ASSERT_TRUE(b.Read()->has_assignment());
  const absl::Time cut = absl::Now();
  b.Cancel();
  auto stop = a.Read();
  ASSERT_TRUE(stop && stop->has_stop());
  EXPECT_LT(absl::Now() - cut, absl::Seconds(2));
  EXPECT_EQ(stop->stop().reason(), pb::StopOrder::MEMBERSHIP_CHANGED);
  EXPECT_THAT(stop->stop().detail(), HasSubstr("node2 left the job"));
  ASSERT_TRUE(a.Join("job", "node1", 1, 2));  // the survivor alone: fast path
  auto again = a.Read();
  ASSERT_TRUE(again && again->has_assignment());
  EXPECT_EQ(again->assignment().world_size(), 2);
  EXPECT_EQ(again->assignment().round(), 1);
}

TEST_F(MasterServerTest, FailureRestartsEveryNodeWithTheSameCount) {
  StartMaster();
  TestSession a(NewChannel()), b(NewChannel());
  ASSERT_TRUE(a.Join("job", "node1", 2, 2, /*max_restarts=*/1));
  ASSERT_TRUE(b.Join("job", "node2", 2, 2, 1));
  ASSERT_TRUE(a.Read()->has_assignment());
  ASSERT_TRUE(b.Read()->has_assignment());
  ASSERT_TRUE(b.ReportFailure(0, 3));
  auto sa = a.Read();
  auto sb = b.Read();
  ASSERT_TRUE(sa && sa->has_stop());
  ASSERT_TRUE(sb && sb->has_stop());
  EXPECT_EQ(sa->stop().reason(), pb::StopOrder::WORKER_FAILED);
  ASSERT_TRUE(a.Join("job", "node1", 2, 2, 1));
  ASSERT_TRUE(b.Join("job", "node2", 2, 2, 1));
  auto ra = a.Read();
  auto rb = b.Read();
  ASSERT_TRUE(ra && ra->has_assignment());
  EXPECT_EQ(ra->assignment().restart_count(), 1);
  EXPECT_EQ(rb->assignment().restart_count(), 1);
  // Budget spent now: the next failure ends the run everywhere with the root cause.
  ASSERT_TRUE(a.ReportFailure(1, 0));
  auto ea = a.Read();
  auto eb = b.Read();
  ASSERT_TRUE(ea && ea->has_end());
  ASSERT_TRUE(eb && eb->has_end());
  EXPECT_EQ(eb->end().outcome(), pb::RunEnd::FAILED);
  ASSERT_EQ(eb->end().root_cause_size(), 1);
}

TEST_F(MasterServerTest, SilentAgentIsDroppedAndTheOthersAreTold) {
  StartMaster();
  TestSession a(NewChannel()), b(NewChannel());
  const absl::Duration keep_alive = absl::Milliseconds(100);
  ASSERT_TRUE(a.Join("job", "node1", 1, 2, 0, "", 2, keep_alive));
  ASSERT_TRUE(b.Join("job", "node2", 1, 2, 0, "", 2, keep_alive));
  ASSERT_TRUE(a.Read()->has_assignment());
  ASSERT_TRUE(b.Read()->has_assignment());
  std::atomic<bool> stop_beating{false};
  std::thread beater([&] {  // a keeps its heartbeats; b goes silent
    while (!stop_beating) {
      a.Heartbeat();
      absl::SleepFor(absl::Milliseconds(20));  // the heartbeat period itself, not a wait
    }
  });
  auto told = a.Read();
  stop_beating = true;
  beater.join();
  ASSERT_TRUE(told && told->has_stop());
  EXPECT_THAT(told->stop().detail(), HasSubstr("node2 left the job: no heartbeat for 200ms"));
  EXPECT_FALSE(b.Read().has_value());  // b's stream is closed, saying why
  grpc::Status status = b.Close();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_THAT(status.error_message(), HasSubstr("the master dropped node2"));
}

TEST_F(MasterServerTest, WrongTokenIsRefusedWithTheSettingToCheck) {
  MasterOptions options;
  options.token = "s3cret";
  StartMaster(options);
  TestSession a(NewChannel());
  ASSERT_TRUE(a.Join("job", "node1", 1, 1, 0, "wrong"));
  EXPECT_FALSE(a.Read().has_value());
  grpc::Status status = a.Close();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("DDPRUN_RDZV_TOKEN"));
  TestSession none(NewChannel());
  ASSERT_TRUE(none.Join("job", "node1", 1, 1));
  EXPECT_FALSE(none.Read().has_value());
  EXPECT_THAT(none.Close().error_message(), HasSubstr("none was given"));
  TestSession right(NewChannel());
  ASSERT_TRUE(right.Join("job", "node1", 1, 1, 0, "s3cret"));
  EXPECT_TRUE(right.Read()->has_assignment());
}

// A second job's agent on this job's port: told which job the port's master runs, and to use
// a port of its own. Only once it has shown the token, as `ddprun status` asks: a stranger
// learns nothing.
TEST_F(MasterServerTest, AJoinForAnotherRunIsToldWhichJobThePortsMasterRuns) {
  MasterOptions options;
  options.only_run_id = "mine";
  options.token = "s3cret";
  StartMaster(options);
  TestSession member(NewChannel());
  ASSERT_TRUE(member.Join("mine", "node1", 2, 2, 0, "s3cret"));
  // The master takes each stream's join on its own: the member's first, or the answer below
  // says no node has joined yet.
  ASSERT_TRUE(
      testing::WaitUntil([&] { return master_->SessionCount("mine") == 1; }, absl::Seconds(10)));
  TestSession a(NewChannel());
  ASSERT_TRUE(a.Join("theirs", "node9", 1, 1, 0, "s3cret"));
  EXPECT_FALSE(a.Read().has_value());
  grpc::Status status = a.Close();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(),
              HasSubstr("this port's rendezvous master runs another job: run 'mine', since "));
  EXPECT_THAT(status.error_message(), HasSubstr("gathering round 0 with 1 node(s) joined"));
  EXPECT_THAT(status.error_message(), HasSubstr("This node asked for run 'theirs'"));
  EXPECT_THAT(status.error_message(), HasSubstr("give that job a port of its own"));
  TestSession stranger(NewChannel());
  ASSERT_TRUE(stranger.Join("theirs", "node8", 1, 1, 0, "guess"));
  EXPECT_FALSE(stranger.Read().has_value());
  status = stranger.Close();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), ::testing::Not(HasSubstr("mine")))
      << "a refusal must not tell a stranger which run the master serves";
}

TEST_F(MasterServerTest, OtherProtocolVersionAndMismatchedSettingsAreRefused) {
  StartMaster();
  TestSession old_agent(NewChannel());
  ASSERT_TRUE(
      old_agent.Join("job", "node1", 1, 2, 0, "", /*version=*/1));  // before addr could be empty
  EXPECT_FALSE(old_agent.Read().has_value());
  EXPECT_THAT(
      old_agent.Close().error_message(),
      HasSubstr("the agent speaks rendezvous protocol version 1 but this master speaks version 2"));
  TestSession a(NewChannel()), b(NewChannel());
  ASSERT_TRUE(a.Join("job", "node1", 1, 1));
  ASSERT_TRUE(a.Read()->has_assignment());  // the run exists with --nnodes=1:1 now
  ASSERT_TRUE(b.Join("job", "node2", 2, 4));
  EXPECT_FALSE(b.Read().has_value());
  EXPECT_THAT(b.Close().error_message(), HasSubstr("start every node with the same values"));
}

TEST_F(MasterServerTest, TwoRunsOnOneMasterDoNotSeeEachOther) {
  StartMaster();
  TestSession a(NewChannel()), b(NewChannel());
  ASSERT_TRUE(a.Join("job-a", "node1", 1, 1));
  ASSERT_TRUE(b.Join("job-b", "node1", 1, 1));
  auto ma = a.Read();
  auto mb = b.Read();
  EXPECT_EQ(ma->assignment().world_size(), 2);
  EXPECT_EQ(mb->assignment().world_size(), 2);
  EXPECT_EQ(mb->assignment().group_rank(), 0);
}

TEST_F(MasterServerTest, StoreVerbsOverTheWire) {
  StartMaster();
  HoldRun("job");
  auto store = pb::Store::NewStub(channel_);
  ASSERT_TRUE(SetKey(*store, "job", "k", "v").ok());
  {
    grpc::ClientContext c;
    pb::GetRequest get;
    get.set_run_id("job");
    get.set_key("k");
    pb::GetResponse r;
    ASSERT_TRUE(store->Get(WithDeadline(c), get, &r).ok());
    EXPECT_EQ(r.value(), "v");
  }
  {
    grpc::ClientContext c;
    pb::AddRequest add;
    add.set_run_id("job");
    add.set_key("n");
    add.set_delta(5);
    pb::AddResponse r;
    ASSERT_TRUE(store->Add(WithDeadline(c), add, &r).ok());
    EXPECT_EQ(r.value(), 5);
  }
  {
    grpc::ClientContext c;
    pb::GetRequest get;
    get.set_run_id("other-job");  // runs are separate namespaces
    get.set_key("k");
    get.set_timeout_ms(50);
    pb::GetResponse r;
    grpc::Status status = store->Get(WithDeadline(c), get, &r);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(status.error_message(), HasSubstr("no agent has joined run 'other-job'"));
    HoldRun("other-job");
    grpc::ClientContext again;
    status = store->Get(WithDeadline(again), get, &r);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    EXPECT_THAT(status.error_message(), HasSubstr("store keys not set in time: k"));
  }
  {
    grpc::ClientContext c;
    pb::SetRequest set;
    set.set_run_id("job");
    set.set_key(std::string(9000, 'x'));
    pb::SetResponse r;
    grpc::Status status = store->Set(WithDeadline(c), set, &r);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("the limit is 8192"));
  }
}

TEST_F(MasterServerTest, BlockingGetIsWokenBySetFromAnotherClient) {
  StartMaster();
  HoldRun("job");
  auto store = pb::Store::NewStub(channel_);
  grpc::Status get_status;
  pb::GetResponse got;
  std::thread reader([&] {
    grpc::ClientContext c;
    pb::GetRequest get;
    get.set_run_id("job");
    get.set_key("ncclUniqueId");
    get.set_timeout_ms(20000);
    get_status = store->Get(WithDeadline(c), get, &got);
  });
  auto writer = pb::Store::NewStub(NewChannel());
  grpc::ClientContext c;
  pb::SetRequest set;
  set.set_run_id("job");
  set.set_key("ncclUniqueId");
  set.set_value("128 bytes");
  pb::SetResponse r;
  ASSERT_TRUE(writer->Set(WithDeadline(c), set, &r).ok());
  reader.join();
  ASSERT_TRUE(get_status.ok()) << get_status.error_message();
  EXPECT_EQ(got.value(), "128 bytes");
}

TEST_F(MasterServerTest, AReadWithoutTimeoutWaitsTheMastersStoreTimeout) {
  MasterOptions options;
  options.store_timeout = absl::Milliseconds(200);  // --rdzv-conf read_timeout on the host
  StartMaster(options);
  HoldRun("job");
  auto store = pb::Store::NewStub(channel_);
  grpc::ClientContext c;
  pb::GetRequest get;
  get.set_run_id("job");
  get.set_key("never");
  pb::GetResponse r;
  const absl::Time start = absl::Now();
  grpc::Status status = store->Get(WithDeadline(c), get, &r);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST_F(MasterServerTest, ACancelledReadLeavesTheStoreAtOnce) {
  StartMaster();  // store_timeout 60 s: a read nobody cancels would be parked for that long
  HoldRun("job");
  auto store = pb::Store::NewStub(channel_);
  for (int i = 0; i < 3; ++i) {  // Get, Wait, MultiGet
    grpc::ClientContext c;
    WithDeadline(c);
    std::thread reader([&] {
      grpc::Status status;
      if (i == 0) {
        pb::GetRequest get;
        get.set_run_id("job");
        get.set_key("never");
        pb::GetResponse r;
        status = store->Get(&c, get, &r);
      } else if (i == 1) {
        pb::WaitRequest wait;
        wait.set_run_id("job");
        wait.add_keys("never");
        pb::WaitResponse r;
        status = store->Wait(&c, wait, &r);
      } else {
        pb::MultiGetRequest get;
        get.set_run_id("job");
        get.add_keys("never");
        pb::MultiGetResponse r;
        status = store->MultiGet(&c, get, &r);
      }
      EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);
    });
    ASSERT_TRUE(
        testing::WaitUntil([&] { return master_->PendingStoreReads() == 1; }, absl::Seconds(10)));
    c.TryCancel();
    reader.join();
    EXPECT_TRUE(
        testing::WaitUntil([&] { return master_->PendingStoreReads() == 0; }, absl::Seconds(5)))
        << "read " << i << " stayed parked after its client cancelled it";
  }
}

TEST_F(MasterServerTest, AnEndedRunIsForgottenWhenItsAgentsLeaveAndItsIdCanBeUsedAgain) {
  StartMaster();
  const int wake = master_->session_end_fd();
  {
    TestSession a(NewChannel());
    ASSERT_TRUE(a.Join("job", "node1", 1, 1));
    auto assigned = a.Read();
    ASSERT_TRUE(assigned && assigned->has_assignment());
    EXPECT_EQ(master_->SessionCount("job"), 1);
    pb::AgentMessage success;
    success.mutable_report()->set_round(assigned->assignment().round());
    success.mutable_report()->set_succeeded(true);
    ASSERT_TRUE(a.Write(success));
    auto end = a.Read();
    ASSERT_TRUE(end && end->has_end());
    EXPECT_TRUE(a.Close().ok());
  }
  ASSERT_TRUE(WaitReadable(wake, absl::Seconds(10)));
  EXPECT_EQ(master_->SessionCount("job"), 0);
  // The same --rdzv-id again, e.g. a requeued Slurm job: a new run, not "already ended".
  TestSession again(NewChannel());
  ASSERT_TRUE(again.Join("job", "node1", 1, 1));
  auto assigned = again.Read();
  ASSERT_TRUE(assigned && assigned->has_assignment()) << "the ended run was not forgotten";
  EXPECT_EQ(assigned->assignment().round(), 0);
}

TEST_F(MasterServerTest, ShutdownEndsBlockingReadsInsteadOfWaitingForThem) {
  StartMaster();
  HoldRun("job");
  auto store = pb::Store::NewStub(channel_);
  grpc::Status status;
  std::thread reader([&] {
    grpc::ClientContext c;
    pb::GetRequest get;
    get.set_run_id("job");
    get.set_key("never");
    get.set_timeout_ms(600000);
    pb::GetResponse r;
    status = store->Get(WithDeadline(c), get, &r);
  });
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (master_->PendingStoreReads() == 0 && absl::Now() < give_up) std::this_thread::yield();
  ASSERT_EQ(master_->PendingStoreReads(), 1);
  holders_.clear();  // an open session would hold the shutdown for its grace period
  const absl::Time start = absl::Now();
  master_->Shutdown(absl::Seconds(30));
  reader.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("shutting down"));
}

// Bytes that are not gRPC at all: what a port scanner, a curl or a confused client sends.
std::string SendRaw(int port, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    (void)!::write(fd, bytes.data(), bytes.size());
    ::shutdown(fd, SHUT_WR);
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return reply;
}

TEST_F(MasterServerTest, GarbageAndPlainHttpOnThePortDoNotDisturbIt) {
  StartMaster();
  TestSession before(NewChannel());
  ASSERT_TRUE(before.Join("job", "node1", 2, 2));
  SendRaw(master_->port(), "GET / HTTP/1.1\r\nHost: master\r\n\r\n");
  std::string garbage(64 * 1024, '\0');
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>((i * 7919 + 13) % 251);
  SendRaw(master_->port(), garbage);
  SendRaw(master_->port(), "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + garbage);  // a broken HTTP/2 start
  // The session opened before goes on, and a new agent still gets its round.
  TestSession after(NewChannel());
  ASSERT_TRUE(after.Join("job", "node2", 2, 2));
  auto ma = before.Read();
  auto mb = after.Read();
  ASSERT_TRUE(ma && ma->has_assignment());
  ASSERT_TRUE(mb && mb->has_assignment());
  EXPECT_EQ(mb->assignment().world_size(), 4);
}

// gRPC gives up a connection attempt after GRPC_ARG_MIN_RECONNECT_BACKOFF_MS. The agent once
// set it to 10 ms (meaning a quick retry): every attempt that took longer than gRPC's backoff
// cap (about 1.2 s) was abandoned, so an agent behind a slow link or a master busy with
// thousands of connections never got through. The handshake here takes 1.5 s.
TEST_F(MasterServerTest, TheAgentsConnectionWaitsForASlowHandshake) {
  StartMaster();
  testing::LinkShape shape;
  shape.delay = absl::Milliseconds(1500);
  auto proxy = testing::DelayProxy::Start(master_->port(), shape);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  NetworkRendezvousOptions options;
  options.endpoint = absl::StrCat("127.0.0.1:", (*proxy)->port());
  options.run_id = "job";
  options.settings.keep_alive_interval = absl::Seconds(30);  // no pings in the way
  options.heartbeat_timeout = absl::Seconds(30);
  GrpcRendezvous agent(options);
  NodeInfo node;
  node.host = "far";
  node.addr = "10.0.0.9";  // through the proxy, the master sees loopback
  node.incarnation = "inc-far";
  node.master_port = 29500;
  agent.Join(node);
  ASSERT_TRUE(WaitReadable(agent.event_fd(), absl::Seconds(25)))
      << "no answer through a link with a 1.5 s delay";
  std::vector<RendezvousEvent> events = agent.TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, RendezvousEvent::Kind::kAssigned) << events[0].status;
}

TEST_F(MasterServerTest, AnOversizedFieldIsRefusedNamingItAndTheLimit) {
  StartMaster();
  TestSession a(NewChannel());
  ASSERT_TRUE(a.Join("job", std::string(300, 'h'), 1, 1));
  EXPECT_FALSE(a.Read());
  grpc::Status status = a.Close();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("join.node.host has 300 bytes; the limit is 255"));
  EXPECT_EQ(master_->SessionCount("job"), 0);
}

TEST_F(MasterServerTest, PortInUseIsAClearError) {
  StartMaster();
  MasterOptions options;
  options.host = "127.0.0.1";
  options.port = master_->port();
  auto second = MasterServer::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("the port is in use"));
}

TEST(WireTest, EveryOutboundSurvivesTheWireAsTheSameEvent) {
  std::vector<Outbound> all(3);
  all[0].kind = Outbound::Kind::kAssign;
  Assignment& a = all[0].assignment;  // by name: a new field must not shift the others
  a.round = 4;
  a.restart_count = 1;
  a.group_rank = 2;
  a.group_world_size = 3;
  a.base_rank = 6;
  a.world_size = 12;
  a.master_addr = "node9";
  a.master_port = 29511;
  all[1].kind = Outbound::Kind::kStop;
  all[1].stop_reason = StopReason::kMembershipChanged;
  all[1].detail = "b left";
  all[2].kind = Outbound::Kind::kEnd;
  all[2].outcome = RunOutcome::kFailed;
  all[2].detail = "budget spent";
  all[2].root_cause.push_back(ReportedFailure{"b", 7, 1, -9, 42, absl::FromUnixSeconds(5), "m"});
  const std::vector<RendezvousEvent> local = EventsFor(0, all);
  ASSERT_EQ(local.size(), 3u);
  for (size_t i = 0; i < all.size(); ++i) {
    const RendezvousEvent remote = EventFromWire(ToWire(all[i]));
    EXPECT_EQ(remote.kind, local[i].kind);
    EXPECT_EQ(remote.detail, local[i].detail);
    EXPECT_EQ(remote.stop_reason, local[i].stop_reason);
    EXPECT_EQ(remote.outcome, local[i].outcome);
    EXPECT_EQ(remote.assignment.round, local[i].assignment.round);
    EXPECT_EQ(remote.assignment.base_rank, local[i].assignment.base_rank);
    EXPECT_EQ(remote.assignment.master_addr, local[i].assignment.master_addr);
    EXPECT_EQ(remote.assignment.master_port, local[i].assignment.master_port);
    ASSERT_EQ(remote.root_cause.size(), local[i].root_cause.size());
    if (!remote.root_cause.empty()) {
      EXPECT_EQ(remote.root_cause[0].exit_code, -9);
      EXPECT_EQ(remote.root_cause[0].time, absl::FromUnixSeconds(5));
    }
  }
}

TEST(WireTest, JoinCarriesTheNodeAndTheJobSettings) {
  NodeInfo node{"h", "10.0.0.2", "h.cluster", 77, "inc", 8, 3, 29600};
  node.addresses = {"10.0.0.2", "::ffff:10.1.0.2", "fd00:0::2"};
  RendezvousSettings settings;
  settings.min_nodes = 2;
  settings.max_nodes = 4;
  const NodeInfo back = NodeFromJoin(JoinToWire(node, "job", "tok", settings));
  EXPECT_THAT(back.addresses, ::testing::ElementsAre("10.0.0.2", "10.1.0.2", "fd00::2"));
  EXPECT_EQ(back.host, "h");
  EXPECT_EQ(back.addr, "10.0.0.2");
  EXPECT_EQ(back.fallback_addr, "h.cluster");
  EXPECT_EQ(back.local_world_size, 8);
  EXPECT_EQ(back.node_rank_hint, 3);
  EXPECT_EQ(back.master_port, 29600);
  EXPECT_EQ(FromWire(JoinToWire(node, "job", "tok", settings).settings()).max_nodes, 4);
}

// The review put ESC[2J, OSC title sequences and carriage returns into every agent's log and
// end-of-job summary (a stop reason, a hang's cause, a failed check's output): whatever a
// peer sends is printable when it arrives, lines of a traceback kept.
TEST(WireTest, TextFromPeersArrivesPrintable) {
  pb::MasterMessage end;
  end.mutable_end()->set_outcome(pb::RunEnd::FAILED);
  end.mutable_end()->set_detail("stopped: training complete\x1b[2J\rforged line");
  end.mutable_end()->add_excluded("h3: \x1b]0;owned\x07; its last output:\nGPU 5");
  pb::WorkerFailure* f = end.mutable_end()->add_root_cause();
  f->set_host("h\x1b[31m");
  f->set_message("Traceback:\n\tline 1\r\x1b[1A");
  const RendezvousEvent event = EventFromWire(end);
  EXPECT_EQ(event.detail, "stopped: training complete\\x1b[2J\\x0dforged line");
  ASSERT_EQ(event.excluded.size(), 1u);
  EXPECT_EQ(event.excluded[0], "h3: \\x1b]0;owned\\x07; its last output:\nGPU 5");
  ASSERT_EQ(event.root_cause.size(), 1u);
  EXPECT_EQ(event.root_cause[0].host, "h\\x1b[31m");
  EXPECT_EQ(event.root_cause[0].message, "Traceback:\n\tline 1\\x0d\\x1b[1A");
  pb::MasterMessage report;
  report.mutable_hang_report()->set_summary("cause\x1b[2J\n");
  EXPECT_EQ(EventFromWire(report).hang_summary, "cause\\x1b[2J\n");
  pb::Join join;
  join.set_failed_check("exit 1\r\x1b[2K");
  EXPECT_EQ(NodeFromJoin(join).failed_check, "exit 1\\x0d\\x1b[2K");
}

TEST(WireTest, WhatAnAgentSendsIsWithinTheLimitsAndEachLimitIsNamed) {
  NodeInfo node{"h", "10.0.0.2", "h.cluster", 77, "inc", 8, 3, 29600};
  node.last_round = 4;
  pb::AgentMessage message;
  *message.mutable_join() = JoinToWire(node, "job", "tok", RendezvousSettings());
  EXPECT_TRUE(CheckLimits(message).ok());
  auto refused = [](pb::AgentMessage m) { return std::string(CheckLimits(m).message()); };
  pb::AgentMessage bad = message;
  bad.mutable_join()->set_run_id(std::string(257, 'r'));
  EXPECT_THAT(refused(bad), HasSubstr("join.run_id has 257 bytes; the limit is 256"));
  bad = message;
  bad.mutable_join()->set_local_world_size(0);
  EXPECT_THAT(refused(bad), HasSubstr("join.local_world_size is 0; it must be in [1, 65536]"));
  bad = message;
  bad.mutable_join()->mutable_settings()->set_max_nodes(0);
  EXPECT_THAT(refused(bad), HasSubstr("join.settings.max_nodes is 0"));
  bad = message;
  bad.mutable_join()->set_master_port(70000);
  EXPECT_THAT(refused(bad), HasSubstr("join.master_port"));
  // The review's attack: a joiner with port 0 that became group rank 0 ended every node.
  bad.mutable_join()->set_master_port(0);
  EXPECT_THAT(refused(bad), HasSubstr("join.master_port is 0; it must be in [1, 65535]"));
  bad = message;
  bad.mutable_join()->mutable_node()->add_addresses("not-an-ip");
  EXPECT_THAT(refused(bad), HasSubstr("join.node.addresses has 'not-an-ip'; each must be an IP"));
  bad = message;
  bad.mutable_join()->mutable_node()->add_addresses("10.0.0.1%" + std::string(1 << 20, 'z'));
  EXPECT_THAT(refused(bad), HasSubstr("join.node.addresses has 1048585 bytes; the limit is 64"));
  bad = message;
  for (int i = 0; i < 65; ++i) bad.mutable_join()->mutable_node()->add_addresses("10.0.0.1");
  EXPECT_THAT(refused(bad), HasSubstr("join.node.addresses (count) is 65"));
  pb::AgentMessage report;
  report.mutable_report()->add_failures()->set_message(std::string(70000, 'x'));
  EXPECT_THAT(refused(report), HasSubstr("report.failures.message has 70000 bytes"));
}

// A restart's split crosses the wire part for part, an absent part stays absent, and a part
// that no restart could take (negative, NaN, over a day) is refused by name.
TEST(WireTest, ARestartsSplitSurvivesTheWireAndItsBoundsAreNamed) {
  RestartSplit split;
  split.round = 3;
  split.restart_count = 2;
  split.stop = absl::Microseconds(40250);
  split.connected = absl::Milliseconds(1307);
  split.total = absl::Milliseconds(1400);
  const pb::AgentMessage message = RestartSplitMessage(split);
  EXPECT_TRUE(CheckLimits(message).ok());
  const RestartSplit back = FromWire(message.restart());
  EXPECT_EQ(back.round, 3);
  EXPECT_EQ(back.restart_count, 2);
  EXPECT_EQ(back.Parts(), split.Parts());
  EXPECT_EQ(back.total, split.total);
  EXPECT_FALSE(back.detection.has_value());
  auto refused = [](pb::AgentMessage m) { return std::string(CheckLimits(m).message()); };
  pb::AgentMessage bad = message;
  bad.mutable_restart()->set_spawn_ms(-1);
  EXPECT_THAT(refused(bad), HasSubstr("restart.spawn_ms is -1; it must be in [0, 86400000]"));
  bad = message;
  bad.mutable_restart()->set_total_ms(std::nan(""));
  EXPECT_THAT(refused(bad), HasSubstr("restart.total_ms is nan"));
  bad = message;
  bad.mutable_restart()->set_round(-1);
  EXPECT_THAT(refused(bad), HasSubstr("restart.round is -1"));
}

// A resume crosses the wire as the agent sends it (no store_clients, no neighbour_store;
// its round digest and place proof), and each of its fields, and an outage's length, is bounded by
// name.
TEST(WireTest, AResumeAndAnOutageCrossTheWireAndTheirBoundsAreNamed) {
  NodeInfo node;
  node.host = "node1";
  node.incarnation = "inc";
  node.master_port = 29500;
  Assignment running;
  running.round = 4;
  running.restart_count = 1;
  running.group_rank = 0;
  running.group_world_size = 2;
  running.world_size = 4;
  running.master_addr = "10.0.0.1";
  running.master_port = 29500;
  running.store_clients = {"10.0.0.1", "10.0.0.2"};
  running.neighbour_store = "10.0.0.2:41000";
  running.round_digest = std::string(32, 'd');
  running.place_proof = {std::string(32, 'p')};
  node.resume = running;
  const pb::AgentMessage message = JoinMessage(node, "job", "", RendezvousSettings());
  EXPECT_TRUE(CheckLimits(message).ok()) << CheckLimits(message);
  const NodeInfo back = NodeFromJoin(message.join());
  ASSERT_TRUE(back.resume.has_value());
  EXPECT_EQ(back.resume->round, 4);
  EXPECT_EQ(back.resume->group_world_size, 2);
  EXPECT_TRUE(back.resume->store_clients.empty());
  EXPECT_TRUE(back.resume->neighbour_store.empty());
  EXPECT_EQ(back.resume->round_digest, running.round_digest) << "the proof crosses the wire";
  EXPECT_EQ(back.resume->place_proof, running.place_proof);
  auto refused = [](pb::AgentMessage m) { return std::string(CheckLimits(m).message()); };
  pb::AgentMessage bad = message;
  bad.mutable_join()->mutable_resume()->set_group_rank(2);
  EXPECT_THAT(refused(bad), HasSubstr("join.resume.group_rank is 2; it must be in [0, 1]"));
  bad = message;
  bad.mutable_join()->mutable_resume()->set_group_world_size(0);
  EXPECT_THAT(refused(bad), HasSubstr("join.resume.group_world_size is 0"));
  bad = message;
  bad.mutable_join()->mutable_resume()->add_store_clients("10.0.0.3");
  EXPECT_THAT(refused(bad), HasSubstr("join.resume.store_clients (count) is 1"));
  bad = message;
  bad.mutable_join()->mutable_resume()->set_neighbour_store("x:1");
  EXPECT_THAT(refused(bad), HasSubstr("join.resume.neighbour_store has 3 bytes; the limit is 0"));
  bad = message;
  bad.mutable_join()->mutable_resume()->set_round_digest(std::string(33, 'd'));
  EXPECT_THAT(refused(bad), HasSubstr("join.resume.round_digest has 33 bytes; the limit is 32"));
  bad = message;
  for (int i = 0; i < 20; ++i) bad.mutable_join()->mutable_resume()->add_place_proof("p");
  EXPECT_THAT(refused(bad), HasSubstr("join.resume.place_proof (count) is 21"));
  bad = message;
  bad.mutable_join()->mutable_resume()->add_place_proof(std::string(64, 'p'));
  EXPECT_THAT(refused(bad), HasSubstr("join.resume.place_proof has 64 bytes; the limit is 32"));
  pb::AgentMessage outage;
  outage.mutable_outage()->set_round(4);
  outage.mutable_outage()->set_lost_ms(3200);
  EXPECT_TRUE(CheckLimits(outage).ok());
  outage.mutable_outage()->set_lost_ms(std::nan(""));
  EXPECT_THAT(refused(outage), HasSubstr("outage.lost_ms is nan"));
  outage.mutable_outage()->set_lost_ms(1);
  outage.mutable_outage()->set_round(-1);
  EXPECT_THAT(refused(outage), HasSubstr("outage.round is -1"));
}

// A master serves the Store of the runs its agents joined only (a Store alone, for any run,
// is rpc/store_only_server.h's).
TEST_F(MasterServerTest, TheStoreOfARunNoAgentJoinedIsRefused) {
  StartMaster(MasterOptions());
  auto store = pb::Store::NewStub(channel_);
  grpc::Status refused = SetKey(*store, "job", "k", "v");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(refused.error_message(), HasSubstr("no agent has joined run 'job'"));
}

}  // namespace
}  // namespace ddprun
