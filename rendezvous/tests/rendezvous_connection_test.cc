#include "rendezvous/rendezvous_connection.h"

#include <poll.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ddprun {
namespace {

using EventKind = RendezvousEvent::Kind;
using ::testing::HasSubstr;

NodeInfo ThisNode(int nproc = 4, int port = 29555) {
  NodeInfo node;
  node.host = "host";
  node.addr = "localhost";
  node.pid = 7;
  node.incarnation = "me";
  node.local_world_size = nproc;
  node.master_port = port;
  return node;
}

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

ReportedFailure Crash(int rank) {
  ReportedFailure f;
  f.host = "host";
  f.rank = rank;
  f.exit_code = 3;
  f.time = absl::Now();
  return f;
}

TEST(LocalRendezvousTest, JoinAssignsRoundZeroWithThisNodeAsMaster) {
  LocalRendezvous rdzv(/*max_restarts=*/0);
  EXPECT_FALSE(Readable(rdzv.event_fd()));
  rdzv.Join(ThisNode());
  EXPECT_TRUE(Readable(rdzv.event_fd()));
  auto events = rdzv.TakeEvents();
  EXPECT_FALSE(Readable(rdzv.event_fd()));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, EventKind::kAssigned);
  EXPECT_EQ(events[0].assignment.round, 0);
  EXPECT_EQ(events[0].assignment.world_size, 4);
  EXPECT_EQ(events[0].assignment.group_rank, 0);
  EXPECT_EQ(events[0].assignment.master_addr, "localhost");
  EXPECT_EQ(events[0].assignment.master_port, 29555);
  EXPECT_EQ(rdzv.store_addr(), "");
}

TEST(LocalRendezvousTest, FailureWithinTheBudgetStopsThenTheRejoinGetsANewRound) {
  LocalRendezvous rdzv(/*max_restarts=*/1);
  rdzv.Join(ThisNode());
  rdzv.TakeEvents();
  rdzv.ReportFailure(0, {Crash(2)});
  auto stop = rdzv.TakeEvents();
  ASSERT_EQ(stop.size(), 1u);
  EXPECT_EQ(stop[0].kind, EventKind::kStop);
  EXPECT_EQ(stop[0].stop_reason, StopReason::kWorkerFailed);
  EXPECT_THAT(stop[0].detail,
              HasSubstr("restarting all workers (1 of --max-restarts=1 restarts used)"));
  rdzv.Join(ThisNode(4, 31000));  // a fresh port for the new round
  auto again = rdzv.TakeEvents();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].assignment.round, 1);
  EXPECT_EQ(again[0].assignment.restart_count, 1);
  EXPECT_EQ(again[0].assignment.master_port, 31000);
}

TEST(LocalRendezvousTest, FailureOverTheBudgetEndsTheRunWithTheRootCause) {
  LocalRendezvous rdzv(/*max_restarts=*/0);
  rdzv.Join(ThisNode());
  rdzv.TakeEvents();
  rdzv.ReportFailure(0, {Crash(1)});
  auto end = rdzv.TakeEvents();
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(end[0].kind, EventKind::kEnd);
  EXPECT_EQ(end[0].outcome, RunOutcome::kFailed);
  ASSERT_EQ(end[0].root_cause.size(), 1u);
  EXPECT_EQ(end[0].root_cause[0].rank, 1);
}

TEST(LocalRendezvousTest, SuccessEndsTheRun) {
  LocalRendezvous rdzv(0);
  rdzv.Join(ThisNode());
  rdzv.TakeEvents();
  rdzv.ReportSuccess(0);
  auto end = rdzv.TakeEvents();
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(end[0].kind, EventKind::kEnd);
  EXPECT_EQ(end[0].outcome, RunOutcome::kSucceeded);
}

TEST(EventsForTest, OnlyTheSessionsOwnMessagesAndEvictionIsALostMaster) {
  std::vector<Outbound> out(3);
  out[0].session = 1;
  out[0].kind = Outbound::Kind::kAssign;
  out[1].session = 2;
  out[1].kind = Outbound::Kind::kStop;
  out[2].session = 1;
  out[2].kind = Outbound::Kind::kEvict;
  out[2].detail = "dropped";
  auto events = EventsFor(1, out);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, EventKind::kAssigned);
  EXPECT_EQ(events[1].kind, EventKind::kLost);
  EXPECT_EQ(events[1].status.code(), absl::StatusCode::kAborted);
}

TEST(LossOrRefusalTest, ARefusalIsTypedApartFromALostMaster) {
  // The agent never looks at status codes: a refusal ends it, a loss makes it reconnect.
  for (const absl::Status& refused :
       {absl::PermissionDeniedError("token"), absl::NotFoundError("run"),
        absl::FailedPreconditionError("ended"), absl::InvalidArgumentError("field"),
        absl::UnimplementedError("old master")}) {
    EXPECT_EQ(LossOrRefusal(refused), EventKind::kRefused) << refused;
  }
  for (const absl::Status& lost : {absl::UnavailableError("closed"), absl::AbortedError("dropped"),
                                   absl::DeadlineExceededError("ping"), absl::InternalError("?")}) {
    EXPECT_EQ(LossOrRefusal(lost), EventKind::kLost) << lost;
  }
}

}  // namespace
}  // namespace ddprun
