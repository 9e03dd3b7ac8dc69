// A node waiting for a round is told how it goes: the master answers a waiting session's
// Heartbeat.want_gathering, and when no master answers, GrpcRendezvous says what does
// (nothing, or another program) instead of waiting out join_timeout in silence.

#include <errno.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "master/tests/master_test_support.h"
#include "net/endpoint_probe.h"
#include "net/grpc_rendezvous.h"
#include "tests/support/child_process.h"
#include "tests/support/silent_listener.h"

namespace ddprun {
namespace {

namespace pb = ::ddprun::v1;

using master_testing::MasterServerTest;
using master_testing::TestSession;
using master_testing::WaitReadable;
using ::testing::HasSubstr;
using testing::SilentListener;

pb::AgentMessage AskHowItGathers() {
  pb::AgentMessage message;
  message.mutable_heartbeat()->set_want_gathering(true);
  return message;
}

TEST_F(MasterServerTest, AWaitingNodeIsToldWhoCameAndHowLongIsLeft) {
  StartMaster();
  TestSession a(NewChannel());
  ASSERT_TRUE(a.Join("job", "node1", 2, 2));
  ASSERT_TRUE(a.Write(AskHowItGathers()));
  std::optional<pb::MasterMessage> answer = a.Read();
  ASSERT_TRUE(answer && answer->has_gathering());
  EXPECT_THAT(answer->gathering().text(),
              HasSubstr("a round needs 2 nodes (--nnodes=2:2); 1 joined: node1; the run ends in "));
  EXPECT_THAT(answer->gathering().text(), HasSubstr(" (join_timeout) unless 1 more joins"));
  // Once the round runs, the question has no answer: members are not waiting.
  TestSession b(NewChannel());
  ASSERT_TRUE(b.Join("job", "node2", 2, 2));
  ASSERT_TRUE(b.Read()->has_assignment());
  ASSERT_TRUE(a.Read()->has_assignment());
  ASSERT_TRUE(a.Write(AskHowItGathers()));
  ASSERT_TRUE(a.ReportFailure(0, 0));  // the next message a gets is the restart's
  std::optional<pb::MasterMessage> next = a.Read();
  ASSERT_TRUE(next);
  EXPECT_FALSE(next->has_gathering());
}

NetworkRendezvousOptions At(int port) {
  NetworkRendezvousOptions options;
  options.endpoint = absl::StrCat("127.0.0.1:", port);
  options.run_id = "job";
  return options;
}

std::string ProgressOf(GrpcRendezvous& agent) {
  agent.CheckProgress();
  if (!WaitReadable(agent.event_fd(), absl::Seconds(20))) return "(no event)";
  std::vector<RendezvousEvent> events = agent.TakeEvents();
  if (events.size() != 1 || events[0].kind != RendezvousEvent::Kind::kProgress) return "(other)";
  EXPECT_FALSE(events[0].status.ok()) << "no master answered";
  return events[0].detail;
}

TEST(GrpcRendezvousProgress, NothingListeningIsSaid) {
  const int port = testing::FreeLoopbackPort();
  GrpcRendezvous agent(At(port));
  EXPECT_EQ(ProgressOf(agent),
            absl::StrCat("the rendezvous master at 127.0.0.1:", port,
                         " does not answer: nothing listens on port ", port,
                         " of 127.0.0.1 (Connection refused): is the rendezvous master up "
                         "there, and is --rdzv-endpoint right?"));
}

TEST(GrpcRendezvousProgress, AnotherProgramOnThePortIsSaid) {
  SilentListener other;
  GrpcRendezvous agent(At(other.port));
  EXPECT_THAT(ProgressOf(agent),
              HasSubstr(absl::StrCat("something listens on 127.0.0.1:", other.port,
                                     " but does not answer as a ddprun rendezvous master")));
}

TEST_F(MasterServerTest, ProbeMasterTellsAMasterFromAnotherProgram) {
  StartMaster();
  EXPECT_TRUE(ProbeMaster(At(master_->port()), absl::Seconds(20)).ok());
  SilentListener other;
  absl::Status not_a_master = ProbeMaster(At(other.port), absl::Seconds(1));
  EXPECT_TRUE(absl::IsUnavailable(not_a_master));
  EXPECT_THAT(not_a_master.message(), HasSubstr("does not answer as a ddprun rendezvous master"));
}

TEST(DescribeUnansweredMaster, SaysWhatToCheckForEachAnswer) {
  EXPECT_EQ(DescribeUnansweredMaster("[::1]:7", {EndpointReach::Kind::kRefused, "refused"}),
            "nothing listens on port 7 of ::1 (refused): is the rendezvous master up there, "
            "and is --rdzv-endpoint right?");
  // A static node names its master with two options: it is told to check those.
  EXPECT_EQ(DescribeUnansweredMaster("h:7", {EndpointReach::Kind::kRefused, "refused"},
                                     "--master-addr and --master-port"),
            "nothing listens on port 7 of h (refused): is the rendezvous master up there, and "
            "are --master-addr and --master-port right?");
  EXPECT_EQ(DescribeUnansweredMaster("h:7", {EndpointReach::Kind::kNoAnswer, "timed out"}),
            "h:7 does not answer (timed out): is the host up, and its port 7 open to this node?");
  EXPECT_EQ(DescribeUnansweredMaster("nohost:7", {EndpointReach::Kind::kUnresolved, "unknown"}),
            "nohost does not resolve here (unknown)");
}

// A follower whose leader's node was just killed probes the dead master's host: the reset of
// a listener closing is that host answering, as a refusal is, so the follower is not cut off.
TEST(ReachOfConnectError, TheHostAnswersWithARefusalOrAReset) {
  EXPECT_EQ(ReachOfConnectError(0), EndpointReach::Kind::kListens);
  EXPECT_EQ(ReachOfConnectError(ECONNREFUSED), EndpointReach::Kind::kRefused);
  EXPECT_EQ(ReachOfConnectError(ECONNRESET), EndpointReach::Kind::kRefused);
  EXPECT_EQ(ReachOfConnectError(ETIMEDOUT), EndpointReach::Kind::kNoAnswer);
  EXPECT_EQ(ReachOfConnectError(EHOSTUNREACH), EndpointReach::Kind::kNoAnswer);
  EXPECT_EQ(ReachOfConnectError(ENETUNREACH), EndpointReach::Kind::kNoAnswer);
}

}  // namespace
}  // namespace ddprun
