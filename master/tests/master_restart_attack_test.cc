// Issue 47's attack on a restarted master, under real agents: two ddprun agents run a job
// whose master (in this process) is stopped and started again on its port; a token
// holder's sessions are there as soon as it listens, before the agents' reconnects, with
// resumes of their own making. The agents' resumes, with the proofs their master gave them,
// decide what the new master takes up: no worker stops, no restart is spent, and the
// token holder's sessions are told to stop (docs/security.md, "A restarted master").

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ddprun/v1/admin.pb.h"
#include "master/tests/master_test_support.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"
#include "tests/support/master_outage.h"
#include "tests/support/proved_round.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

using master_testing::MasterServerTest;
using master_testing::TestSession;
using testing::ChildProcess;
using ::testing::HasSubstr;
using testing::ProcessResult;
using testing::TempDir;
namespace pb = ::ddprun::v1;

constexpr char kToken[] = "a-token-the-attacker-holds";

// A node of the job: 2 count-starts workers, this test's master at `port`, the token. Two
// nodes on one machine need their own addresses (--local-addr); the rightful path without
// it, host names that do not resolve across hosts, is
// NetnsTest.TheMasterOnItsOwnHostKilledAndRestartedStopsNoWorker.
std::unique_ptr<ChildProcess> StartNode(int port, int node, const std::string& dir) {
  const std::vector<std::string> options = {"--nnodes=2",
                                            "--nproc-per-node=2",
                                            "--max-restarts=3",
                                            "--rdzv-backend=c10d",
                                            absl::StrCat("--rdzv-endpoint=127.0.0.1:", port),
                                            "--rdzv-id=job",
                                            "--rdzv-conf=is_host=0",
                                            absl::StrCat("--local-addr=127.0.0.", node)};
  return ChildProcess::Start(testing::DdprunWithTestWorker(options, {"count-starts", dir}),
                             {{"DDPRUN_RDZV_TOKEN", kToken}});
}

// A token holder's resume: the job's settings (status shows them), `running` as its own.
pb::AgentMessage Forged(const std::string& host, const Assignment& running) {
  pb::AgentMessage message = TestSession::JoinMessage("job", host, 2, 2, 3, kToken);
  *message.mutable_join()->mutable_resume() = master_testing::ResumeOnTheWire(running);
  return message;
}

class MasterRestartAttackTest : public MasterServerTest {};

TEST_F(MasterRestartAttackTest, ATokenHoldersResumesDecideNothingUnderRealAgents) {
  MasterOptions options;
  options.token = kToken;
  StartMaster(options);
  options.port = master_->port();
  TempDir dir;
  auto a = StartNode(options.port, 1, dir.path());
  auto b = StartNode(options.port, 2, dir.path());
  ASSERT_TRUE(testing::WaitUntil([&] { return testing::AllLogged(dir, 0, 4, "started", 1); },
                                 absl::Seconds(30)))
      << a->ErrSoFar() << b->ErrSoFar();

  master_.reset();  // the master stops; a new one starts on its port, knowing nothing
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return testing::SaidWorkersGoOn(*a, 0) && testing::SaidWorkersGoOn(*b, 0); },
      absl::Seconds(20)))
      << a->ErrSoFar() << b->ErrSoFar();
  StartMaster(options);
  // eve: a round 9 of one node, every restart spent, group rank 0's store a closed port.
  testing::RoundOf own;
  own.round = 9;
  own.restart_count = 3;
  own.world_size = 2;
  own.incarnations = {"inc-eve"};
  own.master_addr = "127.0.0.1";
  own.master_port = 1;
  TestSession eve(NewChannel());
  ASSERT_TRUE(eve.Write(Forged("eve", testing::ProvedRound(own)[0])));
  // trudy: group rank 1 of a round 0 like the job's, made for herself.
  testing::RoundOf like;
  like.world_size = 4;
  like.incarnations = {"inc-someone", "inc-trudy"};
  like.master_addr = "127.0.0.1";
  like.master_port = 1;
  TestSession trudy(NewChannel());
  ASSERT_TRUE(trudy.Write(Forged("trudy", testing::ProvedRound(like)[1])));

  ASSERT_TRUE(testing::BothHadTheirPlacesBack(*a, *b, 0, absl::Seconds(30)));
  for (TestSession* forged : {&eve, &trudy}) {
    std::optional<pb::MasterMessage> told = forged->Read();
    ASSERT_TRUE(told && told->has_stop()) << (told ? told->DebugString() : "no answer");
    EXPECT_THAT(told->stop().detail(), HasSubstr("the restarted master took up round 0, which "
                                                 "the resumes of 2 node(s) prove"));
  }
  absl::StatusOr<pb::StatusReply> status = master_->Status("job", false);
  ASSERT_TRUE(status.ok() && status->runs_size() == 1) << status.status();
  EXPECT_EQ(status->runs(0).round(), 0);
  EXPECT_EQ(status->runs(0).restarts_used(), 0) << "eve's 3 restarts were taken";
  testing::WriteFile(dir / "release", "");
  ProcessResult ra = a->Wait(absl::Seconds(30)), rb = b->Wait(absl::Seconds(30));
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  testing::ExpectEveryWorkerStartedOnce(dir, 4);
}

}  // namespace
}  // namespace ddprun
