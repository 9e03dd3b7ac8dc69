#include "agent/agent_state_machine.h"
#include "agent/tests/agent_actions.h"

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/exit_codes.h"
#include "common/process_status.h"

namespace ddprun {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Drives an AgentStateMachine with a fake clock, as the shell does: each step feeds one
// event and returns the actions it caused, in order.
class AgentStateMachineTest : public ::testing::Test {
 protected:
  void Make(bool networked = true, bool health_check = false, bool has_token = false) {
    AgentSettings s;
    s.health_check = health_check;
    s.has_token = has_token;
    s.host = "node0";
    s.nproc_per_node = 2;
    s.options.shutdown_timeout = absl::Seconds(30);
    if (networked) {
      s.heartbeat_interval = absl::Seconds(5);
      s.join_deadline = absl::Seconds(605);
      s.master_outage_timeout = absl::Seconds(300);
    }
    s.join_timeout = absl::Seconds(600);
    s.master_endpoint = "master:29400";
    sm_ = std::make_unique<AgentStateMachine>(s, now_);
  }

  std::vector<std::string> Take() {
    actions_ = sm_->TakeActions();
    std::vector<std::string> out;
    for (const AgentAction& a : actions_) {
      // Moments are the scripts' to show (agent/tests/testdata); these tests check the rest.
      if (a.kind != AgentAction::Kind::kLog && a.kind != AgentAction::Kind::kMoment) {
        out.push_back(DescribeAction(a));
      }
    }
    return out;
  }
  std::vector<std::string> LogsOf() const {
    std::vector<std::string> out;
    for (const AgentAction& a : actions_) {
      if (a.kind == AgentAction::Kind::kLog) out.push_back(a.text);
    }
    return out;
  }

  static Assignment Round(int64_t round, int restarts = 0) {
    Assignment a;
    a.round = round;
    a.restart_count = restarts;
    a.world_size = 4;
    a.group_world_size = 2;
    return a;
  }
  static WorkersView Running() { return {}; }
  static WorkersView Failed(bool all_exited) { return {true, all_exited}; }
  static WorkersView AllExited() { return {false, true}; }
  static AttemptResult Succeeded() { return {true, std::nullopt}; }
  static AttemptResult FailedAt(int rank, int code) {
    return {false, AttemptResult::RootCause{rank, code}};
  }

  std::vector<std::string> Start() { return (sm_->Start(now_), Take()); }
  std::vector<std::string> Assign(int64_t round, int restarts = 0) {
    return (sm_->Assigned(Round(round, restarts), now_), Take());
  }
  std::vector<std::string> Workers(const WorkersView& view) {
    return (sm_->WorkersChanged(view, now_), Take());
  }
  std::vector<std::string> Closed(const AttemptResult& result) {
    return (sm_->AttemptClosed(result, now_), Take());
  }
  std::vector<std::string> Stop(StopReason reason = StopReason::kWorkerFailed) {
    return (sm_->StopOrdered(reason, "rank 1 on node1 failed", false, std::nullopt, now_), Take());
  }
  std::vector<std::string> End(RunOutcome outcome, std::vector<ReportedFailure> root = {}) {
    return (sm_->RunEnded(RunEnd{outcome, "the run ended", root, {}}, false, now_), Take());
  }
  std::vector<std::string> Signal(int sig) { return (sm_->Signal(sig, now_), Take()); }
  std::vector<std::string> Hang(int local_rank, bool unhealthy = false) {
    FoundHang hang;
    hang.local_rank = local_rank;
    hang.pid = 100 + local_rank;
    hang.cause = unhealthy ? absl::StrCat("rank ", local_rank,
                                          " has been in uninterruptible sleep for 5s: the node "
                                          "is unhealthy")
                           : absl::StrCat("rank ", local_rank, " sent no heartbeat for 3s");
    hang.node_unhealthy = unhealthy;
    return (sm_->HangFound(hang, now_), Take());
  }
  std::vector<std::string> StacksTaken() { return (sm_->StacksTaken(), Take()); }
  std::vector<std::string> Advance(absl::Duration d) {
    now_ += d;
    sm_->Tick(now_);
    return Take();
  }
  // Runs the first round: started, joined, assigned round 0.
  void RunRoundZero() {
    Make();
    ASSERT_THAT(Start(), ElementsAre("join"));
    ASSERT_THAT(Assign(0), ElementsAre("start-workers round=0 restarts=0"));
    ASSERT_THAT(Workers(Running()), IsEmpty());
  }
  int ExitCode() const {
    for (const AgentAction& a : actions_) {
      if (a.kind == AgentAction::Kind::kExit) return a.exit_code;
    }
    return -1;
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  std::unique_ptr<AgentStateMachine> sm_;
  std::vector<AgentAction> actions_;
};

TEST_F(AgentStateMachineTest, AWorkerFailureIsReportedAtOnceAndTheRestStopped) {
  RunRoundZero();
  EXPECT_THAT(Workers(Failed(false)),
              ElementsAre("stop-workers SIGTERM", "report-failure round=0"));
  EXPECT_THAT(Workers(Failed(false)), IsEmpty()) << "reported once per attempt";
  EXPECT_THAT(Workers(Failed(true)), ElementsAre("close-attempt"));
  EXPECT_THAT(Closed(FailedAt(1, 3)), IsEmpty()) << "the rendezvous decides what comes next";
  EXPECT_EQ(sm_->phase(), AgentStateMachine::Phase::kFinishing);
}

TEST_F(AgentStateMachineTest, RestartAfterAFailureRejoinsWithTheLastRound) {
  RunRoundZero();
  Workers(Failed(true));
  Closed(FailedAt(1, 3));
  EXPECT_THAT(Stop(), ElementsAre("end-store-round", "join after=0"));
  EXPECT_THAT(Assign(1, 1), ElementsAre("start-workers round=1 restarts=1"));
  EXPECT_EQ(sm_->phase(), AgentStateMachine::Phase::kRunning);
}

TEST_F(AgentStateMachineTest, AStopOrderWhileWorkersRunStopsThemThenRejoins) {
  RunRoundZero();
  EXPECT_THAT(Stop(), ElementsAre("end-store-round", "stop-workers SIGTERM"));
  EXPECT_THAT(LogsOf(), ElementsAre("rank 1 on node1 failed"));
  EXPECT_THAT(Stop(), ElementsAre("end-store-round")) << "stopping already: no second SIGTERM";
  EXPECT_THAT(Workers(AllExited()), ElementsAre("close-attempt"));
  EXPECT_THAT(Closed({false, std::nullopt}), ElementsAre("join after=0"));
}

TEST_F(AgentStateMachineTest, AMembershipChangeSaysNoRestartIsSpent) {
  RunRoundZero();
  Stop(StopReason::kMembershipChanged);
  EXPECT_THAT(LogsOf(), ElementsAre(HasSubstr("membership change, no restart spent")));
}

TEST_F(AgentStateMachineTest, SuccessIsReportedAndTheRunEndsWithZero) {
  RunRoundZero();
  EXPECT_THAT(Workers(AllExited()), ElementsAre("close-attempt"));
  EXPECT_THAT(Closed(Succeeded()), ElementsAre("report-success round=0"));
  EXPECT_THAT(LogsOf(), ElementsAre("all 2 workers succeeded"));
  EXPECT_THAT(End(RunOutcome::kSucceeded), ElementsAre("exit 0"));
  EXPECT_TRUE(sm_->done());
  EXPECT_FALSE(sm_->others_still_run());
}

// Without a token anyone who reaches the master can stop the job: that never exits 0.
TEST_F(AgentStateMachineTest, AnOperatorsStopExitsZeroOnlyInAJobWithAToken) {
  for (bool token : {false, true}) {
    Make(/*networked=*/true, /*health_check=*/false, token);
    ASSERT_THAT(Start(), ElementsAre("join"));
    ASSERT_THAT(Assign(0), ElementsAre("start-workers round=0 restarts=0"));
    End(RunOutcome::kStopped);
    Workers(AllExited());
    EXPECT_THAT(Closed({false, std::nullopt}), ElementsAre(token ? "exit 0" : "exit 143"));
    EXPECT_THAT(LogsOf(), Contains(HasSubstr(token ? "; exiting 0" : "; exiting 143, not 0")));
  }
}

TEST_F(AgentStateMachineTest, ReleasedByTheExitBarrierExitsZeroWhileOthersRun) {
  RunRoundZero();
  Workers(AllExited());
  Closed(Succeeded());
  EXPECT_THAT(End(RunOutcome::kReleased), ElementsAre("exit 0"));
  EXPECT_THAT(LogsOf(), ElementsAre(HasSubstr("their outcome is in their own logs")));
  EXPECT_TRUE(sm_->others_still_run());
}

TEST_F(AgentStateMachineTest, BudgetSpentExitsWithTheLocalRootCauseAndItsSummary) {
  RunRoundZero();
  Workers(Failed(true));
  Closed(FailedAt(1, 3));
  ReportedFailure root;
  root.host = "node0";
  root.rank = 1;
  root.exit_code = 3;
  EXPECT_THAT(End(RunOutcome::kFailed, {root}), ElementsAre("failure-summary", "exit 3"));
  EXPECT_THAT(LogsOf(), ElementsAre("job failed (the run ended); exiting with status 3"));
}

TEST_F(AgentStateMachineTest, ARootCauseElsewhereIsNamedAndGivesTheExitStatus) {
  RunRoundZero();
  Workers(Failed(true));
  Closed(FailedAt(1, 143));  // stopped here, after rank 3 on node1 had died of SIGSEGV
  ReportedFailure root;
  root.host = "node1";
  root.rank = 3;
  root.exit_code = -SIGSEGV;
  root.message = "Segmentation fault";
  EXPECT_THAT(End(RunOutcome::kFailed, {root}), ElementsAre("failure-summary", "exit 139"));
  EXPECT_THAT(LogsOf(), ElementsAre("root cause across the job: rank 3 on node1 failed with "
                                    "exitcode -11: Segmentation fault",
                                    HasSubstr("exiting with status 139")));
}

// Rank 1 lost its peer and was reported first; rank 0, which raised, ended during the stop:
// this node saw both, and its choice (rank 0) is the job's root cause.
TEST_F(AgentStateMachineTest, ThisNodesChoiceStandsWhenTheMastersRootCauseIsOneOfItsRanks) {
  RunRoundZero();
  Workers(Failed(true));
  Closed(FailedAt(0, 3));
  ReportedFailure root;
  root.host = "node0";
  root.rank = 1;
  root.exit_code = 1;
  root.peer_lost = true;
  EXPECT_THAT(End(RunOutcome::kFailed, {root}), ElementsAre("failure-summary", "exit 3"));
  EXPECT_THAT(LogsOf(), ElementsAre("job failed (the run ended); exiting with status 3"));
}

// Another agent on this host took this node's old ranks in the last round (it waited for a
// place meanwhile): the same rank number is not this node's failure.
TEST_F(AgentStateMachineTest, ANodeWaitingWhenTheRunEndsTakesTheJobsRootCause) {
  RunRoundZero();
  Workers(Failed(true));
  Closed(FailedAt(1, 2));
  EXPECT_THAT(Stop(), ElementsAre("end-store-round", "join after=0"));
  ReportedFailure root;
  root.host = "node0";
  root.rank = 1;
  root.exit_code = 3;
  root.message = "boom";
  EXPECT_THAT(End(RunOutcome::kFailed, {root}), ElementsAre("failure-summary", "exit 3"));
  EXPECT_THAT(LogsOf(), ElementsAre("root cause across the job: rank 1 on node0 failed with "
                                    "exitcode 3: boom",
                                    HasSubstr("exiting with status 3")));
}

TEST_F(AgentStateMachineTest, ARunThatEndsWhileWorkersRunEndsOnceTheyHaveExited) {
  RunRoundZero();
  EXPECT_THAT(End(RunOutcome::kFailed), ElementsAre("stop-workers SIGTERM"));
  EXPECT_THAT(Workers(AllExited()), ElementsAre("close-attempt"));
  EXPECT_THAT(Closed({false, std::nullopt}), ElementsAre("exit 1"));
}

TEST_F(AgentStateMachineTest, AnEndedRunThatTimedOutExitsWithTheRendezvousStatus) {
  Make();
  Start();
  EXPECT_THAT(End(RunOutcome::kTimedOut), ElementsAre(absl::StrCat("exit ", kExitRendezvous)));
  EXPECT_THAT(LogsOf(), ElementsAre("the run ended"));
}

TEST_F(AgentStateMachineTest, ASignalIsForwardedThenKillsAfterTheGracePeriod) {
  RunRoundZero();
  EXPECT_THAT(Signal(SIGTERM), ElementsAre("stop-workers SIGTERM"));
  EXPECT_THAT(LogsOf(),
              ElementsAre("received SIGTERM: forwarding it to 2 workers, SIGKILL after 30s"));
  EXPECT_EQ(sm_->NextDeadline(), now_ + absl::Seconds(5)) << "the heartbeat comes first";
  EXPECT_THAT(Advance(absl::Seconds(29)), ElementsAre("heartbeat")) << "one tick, one beat";
  EXPECT_THAT(Advance(absl::Seconds(1)),
              ElementsAre("kill-workers (after the 30s grace period (--shutdown-timeout))"));
  EXPECT_THAT(Workers(AllExited()), ElementsAre("close-attempt"));
  EXPECT_THAT(Closed({false, std::nullopt}), ElementsAre("stop-summary SIGTERM", "exit 143"));
}

TEST_F(AgentStateMachineTest, ASecondSignalKillsAtOnce) {
  RunRoundZero();
  Signal(SIGINT);
  EXPECT_THAT(Signal(SIGINT), ElementsAre("kill-workers (at a second SIGINT)"));
  EXPECT_THAT(LogsOf(), ElementsAre("received SIGINT again: killing the workers now"));
  Workers(AllExited());
  EXPECT_THAT(Closed({false, std::nullopt}), ElementsAre("stop-summary SIGINT", "exit 130"));
}

TEST_F(AgentStateMachineTest, ASignalWithNoWorkersRunningExitsAtOnce) {
  Make();
  Start();
  EXPECT_THAT(Signal(SIGTERM), ElementsAre("exit 143"));
  EXPECT_THAT(LogsOf(), ElementsAre("received SIGTERM: no workers are running; exiting"));
}

TEST_F(AgentStateMachineTest, ASignalOutranksEveryOtherOrderOnceWorkersHaveExited) {
  RunRoundZero();
  End(RunOutcome::kSucceeded);
  Signal(SIGTERM);
  sm_->MasterLost("gone", now_);
  Take();
  Workers(AllExited());
  EXPECT_THAT(Closed({false, std::nullopt}), ElementsAre("stop-summary SIGTERM", "exit 143"));
}

TEST_F(AgentStateMachineTest, WithoutItsMasterANodeKeepsItsWorkersAndAsksForItsPlaceBack) {
  RunRoundZero();
  sm_->MasterLost("rendezvous master at master:29400: Socket closed", now_);
  EXPECT_THAT(Take(), ElementsAre("reconnect", "join resume=0"))
      << "group rank 0: its own store is the job's, nothing to check";
  EXPECT_THAT(LogsOf(), ElementsAre(HasSubstr("this node's workers go on (round 0)")));
  EXPECT_THAT(Advance(absl::Seconds(3)), IsEmpty());
  sm_->Resumed(0, now_);
  EXPECT_THAT(Take(), IsEmpty());
  EXPECT_THAT(LogsOf(), ElementsAre("the rendezvous master answers again after 3s: this node has "
                                    "its place back in round 0; its workers never stopped"));
  EXPECT_THAT(Advance(absl::Seconds(300)), ElementsAre("heartbeat"));  // no outage left
}

TEST_F(AgentStateMachineTest, ANodeThatCannotReachGroupRankZeroEitherIsCutOffAndStops) {
  Make();
  Start();
  Assignment second = Round(0);
  second.group_rank = 1;
  second.master_addr = "node1";
  second.master_port = 29500;
  sm_->Assigned(second, now_);
  Take();
  sm_->MasterLost("keepalive watchdog timeout", now_);
  EXPECT_THAT(Take(), ElementsAre("reconnect", "join resume=0", "check-reach node1:29500"));
  sm_->JobReach(true, "", now_);
  EXPECT_THAT(Take(), IsEmpty());
  EXPECT_THAT(Advance(absl::Seconds(5)), ElementsAre("check-reach node1:29500", "heartbeat"));
  sm_->JobReach(false, "timed out", now_);
  EXPECT_THAT(Take(), ElementsAre("end-store-round", "stop-workers SIGTERM"))
      << "a node cut off from the job must not go on training";
  EXPECT_THAT(LogsOf(), ElementsAre(HasSubstr("group rank 0's store at node1:29500 does not answer "
                                              "either (timed out): this node is cut off")));
  Workers(AllExited());
  EXPECT_THAT(Closed({false, std::nullopt}), ElementsAre("reconnect", "join after=0"));
}

// A master that answers and ends the new stream (it cannot take the place back yet) is asked
// again a second later, not in a tight loop.
TEST_F(AgentStateMachineTest, ALostMasterThatTurnsTheResumeAwayIsAskedAgainASecondLater) {
  RunRoundZero();
  sm_->MasterLost("unavailable", now_);
  ASSERT_THAT(Take(), ElementsAre("reconnect", "join resume=0"));
  sm_->MasterLost("rendezvous master at master:29400: taking round 0 up would hold ...", now_);
  EXPECT_THAT(Take(), IsEmpty());
  EXPECT_THAT(Advance(absl::Milliseconds(999)), IsEmpty());
  EXPECT_THAT(Advance(absl::Milliseconds(1)), ElementsAre("reconnect", "join resume=0"));
  sm_->Resumed(0, now_);
  EXPECT_THAT(Take(), IsEmpty());
}

TEST_F(AgentStateMachineTest, NoMasterForTheOutageTimeoutStopsTheWorkers) {
  RunRoundZero();
  sm_->MasterLost("unavailable", now_);
  Take();
  EXPECT_THAT(Advance(absl::Seconds(299)), Each(HasSubstr("heartbeat")));
  EXPECT_THAT(Advance(absl::Seconds(1)), ElementsAre("end-store-round", "stop-workers SIGTERM"));
  EXPECT_THAT(LogsOf(), ElementsAre(HasSubstr("no rendezvous master answered for 5m")));
  Workers(AllExited());
  EXPECT_THAT(Closed({false, std::nullopt}), ElementsAre("reconnect", "join after=0"));
}

TEST_F(AgentStateMachineTest, AFailureWithoutAMasterIsReportedToTheOneThatAnswers) {
  RunRoundZero();
  sm_->MasterLost("unavailable", now_);
  Take();
  EXPECT_THAT(Workers(Failed(false)),
              ElementsAre("stop-workers SIGTERM", "report-failure round=0"));
  Workers(Failed(true));
  EXPECT_THAT(Closed(FailedAt(0, 1)), IsEmpty());  // it waits for the master's word
  sm_->StopOrdered(StopReason::kWorkerFailed, "rank 0 on node0 failed", false, std::nullopt, now_);
  EXPECT_THAT(Take(), ElementsAre("end-store-round", "join after=0"));
}

TEST_F(AgentStateMachineTest, TheMasterLostWhileJoiningReconnectsAtOnce) {
  Make();
  Start();
  sm_->MasterLost("unavailable", now_);
  EXPECT_THAT(Take(), ElementsAre("end-store-round", "reconnect", "join"));
}

TEST_F(AgentStateMachineTest, AnEndedRunOutranksALostMaster) {
  RunRoundZero();
  sm_->MasterLost("unavailable", now_);
  End(RunOutcome::kSucceeded);
  Workers(AllExited());
  EXPECT_THAT(Closed(Succeeded()), ElementsAre("exit 0"));
}

TEST_F(AgentStateMachineTest, ARefusalStopsTheWorkersAndLeavesWithTheRendezvousStatus) {
  RunRoundZero();
  sm_->Refused("the master serves run 'mine', not 'theirs'", now_);
  EXPECT_THAT(Take(), ElementsAre("stop-workers SIGTERM"));
  EXPECT_THAT(LogsOf(), ElementsAre("the rendezvous refused this node: the master serves run "
                                    "'mine', not 'theirs'"));
  Workers(AllExited());
  EXPECT_THAT(Closed({false, std::nullopt}), ElementsAre(absl::StrCat("exit ", kExitRendezvous)));
}

TEST_F(AgentStateMachineTest, ARefusalWhileJoiningLeavesAtOnce) {
  Make();
  Start();
  sm_->Refused("wrong token", now_);
  EXPECT_THAT(Take(), ElementsAre(absl::StrCat("exit ", kExitRendezvous)));
}

TEST_F(AgentStateMachineTest, NoRoundWithinTheJoinDeadlineLeavesNamingTheMaster) {
  Make();
  Start();
  EXPECT_EQ(sm_->NextDeadline(), now_ + absl::Seconds(5));
  now_ += absl::Seconds(604);
  sm_->Tick(now_);
  EXPECT_THAT(Take(), ElementsAre("check-progress", "heartbeat"));
  EXPECT_THAT(Advance(absl::Seconds(1)), ElementsAre(absl::StrCat("exit ", kExitRendezvous)));
  EXPECT_THAT(LogsOf(), ElementsAre(HasSubstr("rendezvous master at master:29400 is not "
                                              "reachable from here")));
  EXPECT_EQ(sm_->NextDeadline(), absl::InfiniteFuture()) << "done: nothing more to wake for";
}

TEST_F(AgentStateMachineTest, AnAssignmentStopsTheJoinDeadline) {
  RunRoundZero();
  for (int i = 0; i < 200; ++i) EXPECT_THAT(Advance(absl::Seconds(5)), ElementsAre("heartbeat"));
  EXPECT_FALSE(sm_->done());
}

TEST_F(AgentStateMachineTest, HeartbeatsGoEveryIntervalWhateverThePhase) {
  Make();
  EXPECT_THAT(Advance(absl::Seconds(5)), ElementsAre("heartbeat")) << "even before joining";
  Start();
  EXPECT_THAT(Advance(absl::Seconds(4)), IsEmpty());
  EXPECT_THAT(Advance(absl::Seconds(1)), ElementsAre("check-progress", "heartbeat"));
}

TEST_F(AgentStateMachineTest, AWaitingNodeChecksItsProgressAfter5sThenEvery30s) {
  Make();
  Start();
  EXPECT_THAT(Advance(absl::Seconds(5)), ElementsAre("check-progress", "heartbeat"));
  for (int i = 0; i < 5; ++i) EXPECT_THAT(Advance(absl::Seconds(5)), ElementsAre("heartbeat"));
  EXPECT_THAT(Advance(absl::Seconds(5)), ElementsAre("check-progress", "heartbeat"));
  sm_->Progress("nothing listens on port 29400 of master", /*master_answered=*/false, now_);
  EXPECT_THAT(Take(), IsEmpty());
  EXPECT_THAT(LogsOf(), ElementsAre("waiting for a round for 35s: nothing listens on port 29400 "
                                    "of master; this node gives up in 9m30s (join_timeout + "
                                    "keep_alive_interval)"));
  EXPECT_THAT(Assign(0), ElementsAre("start-workers round=0 restarts=0"));
  for (int i = 0; i < 12; ++i) EXPECT_THAT(Advance(absl::Seconds(5)), ElementsAre("heartbeat"));
  sm_->Progress("1 joined", /*master_answered=*/true, now_);
  EXPECT_THAT(Take(), IsEmpty());
  EXPECT_THAT(LogsOf(), IsEmpty()) << "running: an answer that comes late is not news";
}

TEST_F(AgentStateMachineTest, OneNodeHasNoHeartbeatAndNoJoinDeadline) {
  Make(/*networked=*/false);
  Start();
  EXPECT_EQ(sm_->NextDeadline(), absl::InfiniteFuture()) << "no progress check either";
}

TEST_F(AgentStateMachineTest, AnAssignmentWhenNotJoiningIsIgnored) {
  RunRoundZero();
  EXPECT_THAT(Assign(1), IsEmpty());
}

TEST_F(AgentStateMachineTest, AFatalErrorExitsWithItsCode) {
  RunRoundZero();
  sm_->Fatal(kExitInternal);
  EXPECT_THAT(Take(), ElementsAre(absl::StrCat("exit ", kExitInternal)));
  sm_->StopOrdered(StopReason::kWorkerFailed, "late", false, std::nullopt, now_);
  sm_->Signal(SIGTERM, now_);
  EXPECT_THAT(Take(), IsEmpty()) << "nothing happens after the end";
}

TEST_F(AgentStateMachineTest, AFailureDuringAStopIsStillReportedButNotStoppedTwice) {
  RunRoundZero();
  Stop();
  EXPECT_THAT(Workers(Failed(false)), ElementsAre("report-failure round=0"));
}

TEST_F(AgentStateMachineTest, TheLastFailedAttemptsRootCauseSurvivesALaterCleanAttempt) {
  RunRoundZero();
  Workers(Failed(true));
  Closed(FailedAt(0, 3));
  Stop();
  Assign(1, 1);
  End(RunOutcome::kFailed);  // the run fails elsewhere while this node's round 1 runs
  Workers(AllExited());
  EXPECT_THAT(Closed({false, std::nullopt}), ElementsAre("failure-summary", "exit 3"));
}

// The kernel holds a worker SIGKILL does not end: the agent must not wait with it.
TEST_F(AgentStateMachineTest, WorkersSigkillDoesNotEndAreAbandonedAtTheKillTimeout) {
  RunRoundZero();
  Signal(SIGINT);
  EXPECT_THAT(Signal(SIGINT), ElementsAre("kill-workers (at a second SIGINT)"));
  EXPECT_EQ(sm_->NextDeadline(), now_ + absl::Seconds(5)) << "the heartbeat comes first";
  Advance(absl::Seconds(5));
  EXPECT_THAT(Advance(absl::Seconds(4)), IsEmpty()) << "still within --kill-timeout (10 s)";
  EXPECT_THAT(Advance(absl::Seconds(1)),
              ElementsAre("abandon-workers (still running 10s after SIGKILL (--kill-timeout): "
                          "the node is unhealthy)",
                          absl::StrCat("exit ", kExitNodeUnhealthy)));
  EXPECT_TRUE(sm_->done());
}

TEST_F(AgentStateMachineTest, WorkersGoneWithinTheKillTimeoutEndTheAttemptAsUsual) {
  RunRoundZero();
  Signal(SIGTERM);
  Signal(SIGTERM);
  EXPECT_THAT(Workers(AllExited()), ElementsAre("close-attempt"));
  EXPECT_THAT(Closed({false, std::nullopt}), ElementsAre("stop-summary SIGTERM", "exit 143"));
  EXPECT_EQ(ExitCode(), 143) << "no kill deadline left to abandon anything";
}

// A worker in uninterruptible sleep: the node cannot run the job. No failure goes to the
// rendezvous (no restart spent); the node takes its stacks, says it leaves and exits 69.
TEST_F(AgentStateMachineTest, AnUnhealthyNodeTakesItsStacksStopsItsWorkersAndSpendsNoRestart) {
  RunRoundZero();
  EXPECT_THAT(Hang(1, /*unhealthy=*/true),
              ElementsAre("freeze-workers", "collect-stacks settle=200ms"));
  EXPECT_THAT(LogsOf(), ElementsAre(HasSubstr("recording where every worker is, then stopping it "
                                              "(local_rank 1, pid 101)"),
                                    HasSubstr("the node is unhealthy; stopping this node's "
                                              "workers; this node leaves the job")));
  EXPECT_THAT(Workers(Failed(false)), IsEmpty()) << "another worker failing changes nothing";
  EXPECT_THAT(StacksTaken(), ElementsAre("kill-hung", "stop-workers SIGTERM"));
  EXPECT_THAT(Workers(AllExited()), ElementsAre("close-attempt"));
  EXPECT_THAT(Closed(FailedAt(1, 137)),
              ElementsAre("leave (rank 1 has been in uninterruptible sleep for 5s: the node is "
                          "unhealthy)",
                          absl::StrCat("exit ", kExitNodeUnhealthy)));
}

// A hung worker is reported at once, but nothing is stopped: the node's workers wait,
// frozen, for the rendezvous to ask every node for its stacks; the stop waits for them.
TEST_F(AgentStateMachineTest, AHangIsReportedAndTheStopWaitsForTheStacks) {
  RunRoundZero();
  EXPECT_THAT(Hang(1), ElementsAre("freeze-workers", "report-failure round=0"));
  EXPECT_THAT(Hang(0), IsEmpty()) << "only the attempt's first hang counts";
  EXPECT_THAT(Workers(Failed(false)), IsEmpty()) << "the hang was the failure reported";
  sm_->StopOrdered(StopReason::kWorkerFailed, "rank 1 on node0 failed", true, std::nullopt, now_);
  EXPECT_THAT(Take(), ElementsAre("collect-stacks settle=200ms", "end-store-round"));
  EXPECT_THAT(StacksTaken(), ElementsAre("kill-hung", "stop-workers SIGTERM"));
  EXPECT_THAT(StacksTaken(), IsEmpty()) << "once";
}

TEST_F(AgentStateMachineTest, AHangWithNoOrderIsKilledAfterTheGracePeriod) {
  RunRoundZero();
  Hang(1);
  Advance(absl::Seconds(25));  // heartbeats
  EXPECT_THAT(
      Advance(absl::Seconds(5)),
      ElementsAre("kill-workers (after the 30s grace period (--shutdown-timeout))", "heartbeat"));
}

TEST_F(AgentStateMachineTest, AStopOrderForAHungRankCollectsStacksBeforeStopping) {
  RunRoundZero();
  sm_->StopOrdered(StopReason::kWorkerFailed, "rank 3 on node1 failed", true, std::nullopt, now_);
  EXPECT_THAT(Take(),
              ElementsAre("freeze-workers", "collect-stacks settle=200ms", "end-store-round"));
  EXPECT_THAT(Signal(SIGTERM), IsEmpty()) << "the stop already waits for the stacks";
  EXPECT_THAT(StacksTaken(), ElementsAre("kill-hung", "stop-workers SIGTERM"));
  Workers(AllExited());
  Closed({false, std::nullopt});
  sm_->RunEnded(RunEnd{RunOutcome::kFailed, "the run ended", {}, {}}, true, now_);
  EXPECT_THAT(Take(), ::testing::Not(::testing::Contains("freeze-workers")))
      << "no workers run between attempts";
}

TEST_F(AgentStateMachineTest, ARunEndForAHungRankCollectsStacksBeforeStopping) {
  RunRoundZero();
  sm_->RunEnded(RunEnd{RunOutcome::kFailed, "rank 3 hung; restart budget spent", {}, {}}, true,
                now_);
  EXPECT_THAT(Take(), ElementsAre("freeze-workers", "collect-stacks settle=200ms"));
  EXPECT_THAT(StacksTaken(), ElementsAre("kill-hung", "stop-workers SIGTERM"));
}

TEST_F(AgentStateMachineTest, OnOneNodeTheStacksAreTakenWithoutASettle) {
  Make(/*networked=*/false);
  Start();
  sm_->Assigned(Assignment(), now_);  // one node: group_world_size 1
  Take();
  EXPECT_THAT(Hang(0), ElementsAre("freeze-workers", "report-failure round=0"));
  sm_->RunEnded(RunEnd{RunOutcome::kFailed, "rank 0 hung", {}, {}}, true, now_);
  EXPECT_THAT(Take(), ElementsAre("collect-stacks settle=0"));
}

// After its stacks went out with only its own ranks, the node waits for the master's merged
// report before it exits: not past HangTimings::report_wait.
TEST_F(AgentStateMachineTest, TheExitWaitsForTheMergedHangReportUntilItsBound) {
  RunRoundZero();
  Hang(1);
  Workers(Failed(true));
  AttemptResult closed = FailedAt(1, 134);
  closed.awaits_hang_report = true;
  Closed(closed);
  EXPECT_THAT(End(RunOutcome::kFailed), ElementsAre("failure-summary"));
  EXPECT_EQ(sm_->phase(), AgentStateMachine::Phase::kExiting);
  EXPECT_EQ(sm_->NextDeadline(), now_ + absl::Seconds(5));
  EXPECT_THAT(Signal(SIGTERM), ElementsAre("exit 134")) << "a signal ends the wait";

  RunRoundZero();
  Hang(1);
  Workers(Failed(true));
  Closed(closed);
  End(RunOutcome::kFailed);
  sm_->HangReportArrived(7);
  EXPECT_THAT(Take(), IsEmpty()) << "another round's report";
  sm_->HangReportArrived(0);
  EXPECT_THAT(Take(), ElementsAre("exit 134"));
  EXPECT_TRUE(sm_->done());

  RunRoundZero();
  Hang(1);
  Workers(Failed(true));
  Closed(closed);
  End(RunOutcome::kFailed);
  EXPECT_THAT(Advance(absl::Seconds(5)), ElementsAre("exit 134"));
  EXPECT_THAT(LogsOf(), ElementsAre(HasSubstr("hang report did not come within 5s")));
}

// --- Node health (docs/node-health.md) ---

TEST_F(AgentStateMachineTest, WithAHealthCheckEveryJoinWaitsForItAndCarriesAFailure) {
  Make(/*networked=*/true, /*health_check=*/true);
  EXPECT_THAT(Start(), ElementsAre("check-health"));
  EXPECT_EQ(sm_->phase(), AgentStateMachine::Phase::kChecking);
  EXPECT_THAT(Assign(0), IsEmpty()) << "no round before the check has answered";
  sm_->HealthChecked("", now_);
  EXPECT_THAT(Take(), ElementsAre("join"));
  ASSERT_THAT(Assign(0), ElementsAre("start-workers round=0 restarts=0"));
  Workers(Failed(true));
  Closed(FailedAt(1, 3));
  EXPECT_THAT(Stop(), ElementsAre("end-store-round", "check-health"));  // again before a rejoin
  sm_->HealthChecked("it ended with exit code 1", now_);
  EXPECT_THAT(Take(), ElementsAre("join after=0 unhealthy (it ended with exit code 1)"));
  EXPECT_THAT(LogsOf(), ElementsAre(HasSubstr("health check failed")));
}

TEST_F(AgentStateMachineTest, AnExcludedNodeStopsItsWorkersWaitsOutTheCooldownAndChecksAgain) {
  Make(/*networked=*/true, /*health_check=*/true);
  Start();
  sm_->HealthChecked("", now_);
  Take();
  Assign(0);
  sm_->Excluded("node0: excluded for another 1m0s", absl::Seconds(60), now_);
  EXPECT_THAT(Take(), ElementsAre("stop-workers SIGTERM"));
  EXPECT_THAT(Workers(AllExited()), ElementsAre("close-attempt"));
  EXPECT_THAT(Closed(Succeeded()), IsEmpty()) << "no success is reported for a stopped attempt";
  EXPECT_EQ(sm_->phase(), AgentStateMachine::Phase::kCoolingDown);
  EXPECT_THAT(LogsOf(), ElementsAre(HasSubstr("join again in 1m")));
  EXPECT_EQ(sm_->NextDeadline(), now_ + absl::Seconds(5)) << "heartbeats go on meanwhile";
  EXPECT_THAT(Advance(absl::Seconds(59)), Each(std::string("heartbeat")));
  EXPECT_THAT(Advance(absl::Seconds(1)), ElementsAre("check-health"));
}

TEST_F(AgentStateMachineTest, ExcludedForTheRestOfTheJobTheAgentExits69) {
  Make();
  Start();
  Take();
  sm_->Excluded("node0: it is listed in --exclude-hosts", absl::InfiniteDuration(), now_);
  EXPECT_THAT(Take(), ElementsAre("exit 69"));
  EXPECT_THAT(LogsOf(), ElementsAre(HasSubstr("--exclude-hosts"), HasSubstr("exits 69")));
  EXPECT_TRUE(sm_->others_still_run()) << "a master it hosts must serve the others on";
}

TEST_F(AgentStateMachineTest, TheRunEndingDuringACooldownEndsTheAgentToo) {
  Make();
  Start();
  Take();
  sm_->Excluded("node0: excluded for another 5m0s", absl::Minutes(5), now_);
  Take();
  EXPECT_THAT(End(RunOutcome::kSucceeded), ElementsAre("exit 0"));
}

TEST_F(AgentStateMachineTest, ASignalDuringTheHealthCheckExitsWithoutJoining) {
  Make(/*networked=*/true, /*health_check=*/true);
  Start();
  EXPECT_THAT(Signal(SIGTERM), ElementsAre("exit 143"));
  sm_->HealthChecked("", now_);
  EXPECT_THAT(Take(), IsEmpty());
}

}  // namespace
}  // namespace ddprun
