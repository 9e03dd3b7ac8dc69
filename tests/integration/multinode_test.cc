// Several agents as separate processes on loopback, each with its own --local-addr, with
// the master embedded in one of them or run alone as ddprun-master.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/unique_fd.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"
#include "tests/support/delay_proxy.h"
#include "tests/support/master_outage.h"
#include "tests/support/tcp_sockets.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;

const std::string kMaster = DDPRUN_MASTER_BIN;

// The command line of one agent of a c10d job on loopback address 127.0.0.<node>.
std::vector<std::string> Agent(int port, int node, const std::string& nnodes,
                               std::vector<std::string> worker_args,
                               std::vector<std::string> extra = {}) {
  std::vector<std::string> options = {
      "--nnodes=" + nnodes,  "--nproc-per-node=2",
      "--rdzv-backend=c10d", absl::StrCat("--rdzv-endpoint=127.0.0.1:", port),
      "--rdzv-id=job",       absl::StrCat("--local-addr=127.0.0.", node)};
  // Node 1 hosts the master; the others only join, so that the tests know where it is.
  std::string conf = node != 1 ? "is_host=0" : "";
  for (const std::string& option : extra) {
    if (option.rfind("--rdzv-conf=", 0) == 0) {
      conf += (conf.empty() ? "" : ",") + option.substr(12);
    } else {
      options.push_back(option);
    }
  }
  if (!conf.empty()) options.push_back("--rdzv-conf=" + conf);
  return DdprunWithTestWorker(options, worker_args);
}

// Every one of `ranks` ranks wrote `needle` (count-starts mode) at least `times` times.
bool AllRanksLogged(const TempDir& dir, int ranks, const std::string& needle, int times) {
  for (int rank = 0; rank < ranks; ++rank) {
    if (CountLinesContaining(ReadFile(dir / absl::StrCat("starts.", rank)), needle) < times) {
      return false;
    }
  }
  return true;
}

bool AllExist(const TempDir& dir, const std::vector<std::string>& names) {
  for (const auto& name : names) {
    if (!FileExists(dir / name)) return false;
  }
  return true;
}

TEST(MultiNode, TwoByTwoGetsRanksZeroToThree) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  auto a = ChildProcess::Start(Agent(port, 1, "2", {"env", dir.path()}));
  auto b = ChildProcess::Start(Agent(port, 2, "2", {"env", dir.path()}));
  ProcessResult ra = a->Wait(absl::Seconds(30));
  ProcessResult rb = b->Wait(absl::Seconds(30));
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE(rank);
    auto env = ParseEnvFile(dir / absl::StrCat("env.", rank, ".0"));
    EXPECT_EQ(env["RANK"], std::to_string(rank));
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(rank % 2));
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    EXPECT_EQ(env["GROUP_RANK"], std::to_string(rank / 2));
    EXPECT_EQ(env["GROUP_WORLD_SIZE"], "2");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");  // group rank 0: natural order of addresses
    EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "job");
    EXPECT_EQ(env["DDPRUN_STORE_ADDR"], absl::StrCat("127.0.0.1:", port));
  }
  EXPECT_EQ(ParseEnvFile(dir / "env.0.0")["MASTER_PORT"],
            ParseEnvFile(dir / "env.3.0")["MASTER_PORT"]);
}

TEST(MultiNode, ACrashOnOneNodeRestartsAllFourWithOneCount) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  const absl::Time start = absl::Now();
  auto a = ChildProcess::Start(
      Agent(port, 1, "2", {"crash-once", "3", "7", dir.path()}, {"--max-restarts=1"}));
  auto b = ChildProcess::Start(
      Agent(port, 2, "2", {"crash-once", "3", "7", dir.path()}, {"--max-restarts=1"}));
  ProcessResult ra = a->Wait(absl::Seconds(30));
  ProcessResult rb = b->Wait(absl::Seconds(30));
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_TRUE(AllExist(dir, {"ran.0.1", "ran.1.1", "ran.2.1", "ran.3.1"}))
      << "every rank on both nodes must run again with TORCHELASTIC_RESTART_COUNT=1";
  EXPECT_THAT(ra.err, HasSubstr("rank 3 on 127.0.0.2 failed"));
}

// The common restart: every node connected and healthy. The master sends the next round with
// the stop order (one message per node, no rejoin); a node with a health check, which must run
// before every round, has every node rejoin instead. Both restart every rank.
TEST(MultiNode, ACrashRestartsInPlaceUnlessAHealthCheckMustRunFirst) {
  for (const bool health_check : {false, true}) {
    SCOPED_TRACE(health_check ? "with --health-check" : "in place");
    TempDir dir;
    const int port = FreeLoopbackPort();
    std::vector<std::string> extra = {"--max-restarts=1"};
    if (health_check) extra.push_back("--health-check=true");
    auto a = ChildProcess::Start(Agent(port, 1, "2", {"crash-once", "3", "7", dir.path()}, extra),
                                 {{"LOGLEVEL", "INFO"}});
    auto b = ChildProcess::Start(Agent(port, 2, "2", {"crash-once", "3", "7", dir.path()}, extra));
    ProcessResult ra = a->Wait(absl::Seconds(30));
    ProcessResult rb = b->Wait(absl::Seconds(30));
    ASSERT_EQ(ra.exit_code, 0) << ra.err;
    ASSERT_EQ(rb.exit_code, 0) << rb.err;
    EXPECT_TRUE(AllExist(dir, {"ran.0.1", "ran.1.1", "ran.2.1", "ran.3.1"}));
    const std::string in_place = "round 1 begins at once, the same nodes in the same order";
    if (health_check) {
      EXPECT_THAT(ra.err, ::testing::Not(HasSubstr(in_place)));
      EXPECT_THAT(ra.err, HasSubstr("round 0 stops: rank 3 on 127.0.0.2 failed"));
    } else {
      EXPECT_THAT(ra.err, HasSubstr(in_place)) << ra.err;
    }
  }
}

TEST(MultiNode, BudgetSpentFailsEveryNodeWithTheRootCause) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  auto a = ChildProcess::Start(Agent(port, 1, "2", {"crash-once", "2", "9", dir.path()}));
  auto b = ChildProcess::Start(Agent(port, 2, "2", {"crash-once", "2", "9", dir.path()}));
  ProcessResult ra = a->Wait(absl::Seconds(30));
  ProcessResult rb = b->Wait(absl::Seconds(30));
  EXPECT_EQ(rb.exit_code, 9) << rb.err;
  EXPECT_EQ(ra.exit_code, 9) << ra.err;  // the global root cause's code, on every node
  EXPECT_THAT(ra.err, HasSubstr("root cause across the job: rank 2 on 127.0.0.2"));
  EXPECT_THAT(rb.err, HasSubstr("rank      : 2 (local_rank: 0)"));
}

// An error file may hold any amount; the master takes at most 64 KiB in a failure report.
// The report is cut, not refused: every node still fails with the worker's code.
TEST(MultiNode, AHugeErrorMessageIsCutNotRefused) {
  const int port = FreeLoopbackPort();
  auto a = ChildProcess::Start(Agent(port, 1, "2", {"huge-error-file", "5"}));
  auto b = ChildProcess::Start(Agent(port, 2, "2", {"huge-error-file", "5"}));
  ProcessResult ra = a->Wait(absl::Seconds(30));
  ProcessResult rb = b->Wait(absl::Seconds(30));
  EXPECT_EQ(ra.exit_code, 5) << ra.err.substr(0, 3000);
  EXPECT_EQ(rb.exit_code, 5) << rb.err.substr(0, 3000);
  EXPECT_THAT(rb.err, HasSubstr("(cut at 16 KiB)"));
}

TEST(MultiNode, KillNineOfOneAgentLeavesTheOtherRunningAlone) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  auto a = ChildProcess::Start(Agent(port, 1, "1:2", {"round-env", dir.path()}));
  auto b = ChildProcess::Start(Agent(port, 2, "1:2", {"round-env", dir.path()}));
  ASSERT_TRUE(WaitUntil(
      [&] {
        return AllExist(dir, {"env.0.r0", "env.1.r0", "env.2.r0", "env.3.r0"});
      },
      absl::Seconds(20)));
  const absl::Time killed = absl::Now();
  kill(b->pid(), SIGKILL);  // 127.0.0.2: not the host of the master
  b->Wait(absl::Seconds(10));
  ASSERT_TRUE(WaitUntil(
      [&] {
        return AllExist(dir, {"env.0.r1", "env.1.r1"});
      },
      absl::Seconds(20)));
  // Its stream broke: the master would hold its place for keep_alive_interval (5 s), but
  // nothing listens on its store's port any more, so its agent is gone: at once.
  EXPECT_LT(absl::Now() - killed, absl::Seconds(5));
  auto env = ParseEnvFile(dir / "env.0.r1");
  EXPECT_EQ(env["WORLD_SIZE"], "2");
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "0");  // membership changes spend no restart
  WriteFile(dir / "release", "");
  ProcessResult ra = a->Wait(absl::Seconds(20));
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_THAT(ra.err, HasSubstr("127.0.0.2 left the job: its connection to the master broke and "
                                "its agent is gone"));
}

TEST(MultiNode, ALateJoinerGrowsTheJobWithoutSpendingBudget) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  const std::vector<std::string> quick = {"--rdzv-conf=last_call_timeout=0.2"};
  auto a = ChildProcess::Start(Agent(port, 1, "1:3", {"round-env", dir.path()}, quick));
  ASSERT_TRUE(WaitUntil(
      [&] {
        return AllExist(dir, {"env.0.r0", "env.1.r0"});
      },
      absl::Seconds(20)));
  EXPECT_EQ(ParseEnvFile(dir / "env.0.r0")["WORLD_SIZE"], "2");
  auto b = ChildProcess::Start(Agent(port, 2, "1:3", {"round-env", dir.path()}, quick));
  ASSERT_TRUE(WaitUntil(
      [&] {
        return AllExist(dir, {"env.0.r1", "env.1.r1", "env.2.r1", "env.3.r1"});
      },
      absl::Seconds(20)));
  auto env = ParseEnvFile(dir / "env.3.r1");
  EXPECT_EQ(env["WORLD_SIZE"], "4");
  EXPECT_EQ(env["GROUP_RANK"], "1");  // the first node keeps rank 0
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "0");
  WriteFile(dir / "release", "");
  EXPECT_EQ(a->Wait(absl::Seconds(20)).exit_code, 0);
  EXPECT_EQ(b->Wait(absl::Seconds(20)).exit_code, 0);
}

TEST(MultiNode, StandaloneMasterStartedAfterTheAgents) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  const std::vector<std::string> client = {"--rdzv-conf=is_host=0"};
  auto a = ChildProcess::Start(Agent(port, 1, "2", {"env", dir.path()}, client));
  auto b = ChildProcess::Start(Agent(port, 2, "2", {"env", dir.path()}));  // a client already
  auto master = ChildProcess::Start({kMaster, "--host=127.0.0.1", absl::StrCat("--port=", port)});
  ProcessResult ra = a->Wait(absl::Seconds(30));
  ProcessResult rb = b->Wait(absl::Seconds(30));
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_EQ(ParseEnvFile(dir / "env.3.0")["WORLD_SIZE"], "4");
  kill(master->pid(), SIGTERM);
  ProcessResult rm = master->Wait(absl::Seconds(10));
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_THAT(rm.err, HasSubstr(absl::StrCat("listening on 127.0.0.1:", port)));
}

// The master is not in the data path: a ddprun-master killed and started again 3 s later
// stops no worker. Each agent keeps its workers, reconnects and asks for its place back; the
// new master takes the round up from them (docs/protocol.md, "Losing the master").
TEST(MultiNode, MasterKilledAndRestartedNoWorkerStopsAndTheRoundGoesOn) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  const std::vector<std::string> master_argv = {kMaster, "--host=127.0.0.1",
                                                absl::StrCat("--port=", port)};
  auto master = ChildProcess::Start(master_argv);
  const std::vector<std::string> client = {"--rdzv-conf=is_host=0"};
  auto a = ChildProcess::Start(Agent(port, 1, "2", {"count-starts", dir.path()}, client));
  auto b = ChildProcess::Start(Agent(port, 2, "2", {"count-starts", dir.path()}));
  auto started = [&](int times) { return AllRanksLogged(dir, 4, "started", times); };
  ASSERT_TRUE(WaitUntil([&] { return started(1); }, absl::Seconds(20)));
  kill(master->pid(), SIGKILL);
  master->Wait(absl::Seconds(10));
  const auto lost = [](ChildProcess& agent) {
    return agent.ErrSoFar().find("lost the rendezvous master") != std::string::npos;
  };
  ASSERT_TRUE(WaitUntil([&] { return SaidWorkersGoOn(*a, 0) && SaidWorkersGoOn(*b, 0); },
                        absl::Seconds(20)));
  absl::SleepFor(absl::Seconds(3));  // the outage the issue names: started again 3 s later
  auto second = ChildProcess::Start(master_argv);
  ASSERT_TRUE(BothHadTheirPlacesBack(*a, *b, 0, absl::Seconds(20)));
  // The new master's status shows the round it took up, and how long its nodes were without
  // a master (each node tells it once it has its place back).
  ProcessResult status;
  ASSERT_TRUE(WaitUntil(
      [&] {
        status = RunProcess({kDdprun, "status", "--rdzv-id=job", "--json",
                             absl::StrCat("--rdzv-endpoint=127.0.0.1:", port)},
                            {}, absl::Seconds(30));
        return status.out.find("\"master_outage_ms\"") != std::string::npos;
      },
      absl::Seconds(20)))
      << status.out << status.err;
  EXPECT_THAT(status.out, HasSubstr("\"taken_up\": true"));
  WriteFile(dir / "release", "");
  ProcessResult ra = a->Wait(absl::Seconds(20));
  ProcessResult rb = b->Wait(absl::Seconds(20));
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  ExpectEveryWorkerStartedOnce(dir, 4);
  // The new master ended the run as the old one would have: it saw every node succeed.
  kill(second->pid(), SIGTERM);
  ProcessResult rm = second->Wait(absl::Seconds(10));
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_THAT(rm.err, HasSubstr("every node's workers succeeded"));
}

// A master that stops answering without closing anything (a hung host): every agent notices
// within keep_alive_interval + heartbeat_timeout, but its workers go on, since group rank 0's
// store still answers; when the master answers again, each agent has its place back.
TEST(MultiNode, SilentMasterTheWorkersGoOnAndTheAgentsHaveTheirPlacesBackWhenItAnswers) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  auto master = ChildProcess::Start({kMaster, "--host=127.0.0.1", absl::StrCat("--port=", port)});
  // Agents notice a silent master within 1 s; the master's own window (5 s) is wide, so that
  // a loaded machine delaying a heartbeat does not drop an agent before the test begins.
  const std::vector<std::string> quick = {
      "--rdzv-conf=keep_alive_interval=0.5,heartbeat_timeout=0.5,keep_alive_max_attempt=10"};
  std::vector<std::string> client = quick;
  client.push_back("--rdzv-conf=is_host=0");
  auto a = ChildProcess::Start(Agent(port, 1, "2", {"count-starts", dir.path()}, client));
  auto b = ChildProcess::Start(Agent(port, 2, "2", {"count-starts", dir.path()}, quick));
  ASSERT_TRUE(WaitUntil([&] { return AllRanksLogged(dir, 4, "started", 1); }, absl::Seconds(20)))
      << a->ErrSoFar() << b->ErrSoFar();
  ASSERT_EQ(kill(master->pid(), SIGSTOP), 0);
  const bool noticed =
      WaitUntil([&] { return SaidWorkersGoOn(*a, 0) && SaidWorkersGoOn(*b, 0); }, absl::Seconds(4));
  ASSERT_EQ(kill(master->pid(), SIGCONT), 0);
  ASSERT_TRUE(noticed) << a->ErrSoFar() << b->ErrSoFar();
  ASSERT_TRUE(BothHadTheirPlacesBack(*a, *b, 0, absl::Seconds(20)));
  WriteFile(dir / "release", "");
  ProcessResult ra = a->Wait(absl::Seconds(20));
  ProcessResult rb = b->Wait(absl::Seconds(20));
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  ExpectEveryWorkerStartedOnce(dir, 4);
  kill(master->pid(), SIGTERM);
  EXPECT_EQ(master->Wait(absl::Seconds(10)).exit_code, 0);
}

// Node 1 (hosting the master) is done long before node 2: after --exit-barrier-timeout it
// exits 0 with a warning, but only once node 2, which goes on undisturbed, is done with
// the master it hosts.
TEST(MultiNode, ExitBarrierTimeoutReleasesTheFinishedNodeAndTheOtherGoesOn) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  const std::vector<std::string> barrier = {"--exit-barrier-timeout=0.5"};
  auto a = ChildProcess::Start(Agent(port, 1, "2", {"exit", "0"}, barrier));
  auto b = ChildProcess::Start(Agent(port, 2, "2", {"count-starts", dir.path()}, barrier));
  ASSERT_TRUE(WaitUntil(
      [&] { return a->ErrSoFar().find("serving it until they finish") != std::string::npos; },
      absl::Seconds(20)))
      << a->ErrSoFar();
  EXPECT_THAT(a->ErrSoFar(), HasSubstr("exit barrier timed out after 500ms"));
  EXPECT_THAT(a->ErrSoFar(), HasSubstr("still running: 127.0.0.2"));
  EXPECT_EQ(CountLinesContaining(ReadFile(dir / "starts.2"), "stopped"), 0);
  WriteFile(dir / "release", "");
  ProcessResult rb = b->Wait(absl::Seconds(20));
  ProcessResult ra = a->Wait(absl::Seconds(20));
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(CountLinesContaining(ReadFile(dir / "starts.2"), "started"), 1);
}

// Node 2's workers all succeeded; it waits at the exit barrier while node 1's still run, and
// node 1's agent, which hosts the master, is killed. Node 2's work is done: it asks for a
// master for the keep-alive window (15 s), saying how the wait goes, then exits 0, as
// torchrun's agent does when its exit barrier's store is gone. It never runs the script
// again (it used to wait 5 minutes, then rejoin for a new round).
TEST(MultiNode, AFinishedNodeWhoseMasterIsKilledExitsZeroWithinTheKeepAliveWindow) {
  TempDir running, finished;
  WriteFile(finished / "release", "");  // node 2's workers exit 0 at once
  const int port = FreeLoopbackPort();
  const std::map<std::string, std::optional<std::string>> info = {{"LOGLEVEL", "INFO"}};
  auto a = ChildProcess::Start(Agent(port, 1, "2", {"count-starts", running.path()}), info);
  auto b = ChildProcess::Start(Agent(port, 2, "2", {"count-starts", finished.path()}), info);
  ASSERT_TRUE(
      WaitUntil([&] { return b->ErrSoFar().find("all 2 workers succeeded") != std::string::npos; },
                absl::Seconds(30)))
      << b->ErrSoFar();
  ASSERT_EQ(::kill(a->pid(), SIGKILL), 0);
  a->Wait(absl::Seconds(10));
  ProcessResult rb = b->Wait(absl::Seconds(60));
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_THAT(rb.err, HasSubstr("this node's workers all succeeded (round 0): it asks a master "
                                "to take that for up to 15s"));
  EXPECT_THAT(rb.err, HasSubstr("no rendezvous master yet (lost 5s ago)"));
  EXPECT_THAT(rb.err, HasSubstr("no rendezvous master answered within 15s of its loss"));
  for (int rank : {2, 3}) {
    EXPECT_EQ(CountLinesContaining(ReadFile(finished / absl::StrCat("starts.", rank)), "started"),
              1)
        << "rank " << rank << " ran once: " << rb.err;
  }
}

// Two jobs on one port, neither with a --rdzv-id (the run 'none' each): each agent warns once
// that another job on its endpoint would join its run. Job 2's agents find job 1's run at
// its --nnodes maximum and wait as spares; job 1 ends, and they exit 0 having run nothing,
// as torchrun's spares do, and say so, with what to give a second job.
TEST(MultiNode, ASecondJobOnTheDefaultRunIdWaitsAsSparesAndIsToldItRanNothing) {
  TempDir first, second;
  const int port = FreeLoopbackPort();
  const auto agent = [&](int node, const TempDir& dir) {
    std::vector<std::string> options = {"--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
                                        absl::StrCat("--rdzv-endpoint=127.0.0.1:", port),
                                        absl::StrCat("--local-addr=127.0.0.", node)};
    return ChildProcess::Start(DdprunWithTestWorker(options, {"count-starts", dir.path()}),
                               {{"LOGLEVEL", "INFO"}});  // the host says who waits
  };
  auto a1 = agent(1, first);
  auto a2 = agent(2, first);
  ASSERT_TRUE(WaitUntil([&] { return AllRanksLogged(first, 2, "started", 1); }, absl::Seconds(30)))
      << a1->ErrSoFar() << a2->ErrSoFar();
  auto b1 = agent(3, second);
  auto b2 = agent(4, second);
  ASSERT_TRUE(WaitUntil(
      [&] {
        return CountLinesContaining(a1->ErrSoFar() + a2->ErrSoFar(), "waits for a place") >= 2;
      },
      absl::Seconds(30)))
      << a1->ErrSoFar() << a2->ErrSoFar() << b1->ErrSoFar();
  WriteFile(first / "release", "");
  for (auto* job1 : {a1.get(), a2.get()}) {
    ProcessResult done = job1->Wait(absl::Seconds(30));
    EXPECT_EQ(done.exit_code, 0) << done.err;
  }
  for (auto* job2 : {b1.get(), b2.get()}) {
    ProcessResult done = job2->Wait(absl::Seconds(30));
    EXPECT_EQ(done.exit_code, 0) << done.err;
    EXPECT_THAT(done.err, HasSubstr("--rdzv-id is not set, so this job's run is 'none'"));
    EXPECT_THAT(done.err, HasSubstr("ended (every node's workers succeeded) before it had a "
                                    "place: this node ran nothing and exits 0"));
    EXPECT_THAT(done.err, HasSubstr("give it a --rdzv-endpoint port and a --rdzv-id of its own"));
  }
  EXPECT_FALSE(FileExists(second / "starts.0")) << "job 2 ran nothing under job 1's master";
  EXPECT_FALSE(FileExists(second / "starts.1"));
}

// A slow link between the agents and the master (100 ms each way, and a 300 ms stall now
// and then, as TCP shows packet loss): the job still forms, and a crash still restarts
// every worker once.
TEST(MultiNode, OverASlowLinkTheJobStillFormsAndRestarts) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  auto master = ChildProcess::Start({kMaster, "--host=127.0.0.1", absl::StrCat("--port=", port)});
  LinkShape shape;
  shape.delay = absl::Milliseconds(100);
  shape.stall_every = 7;
  shape.stall = absl::Milliseconds(300);
  auto proxy = DelayProxy::Start(port, shape);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  const absl::Time start = absl::Now();
  auto agent = [&](int node) {
    std::vector<std::string> extra = {"--max-restarts=1"};
    if (node == 1) extra.push_back("--rdzv-conf=is_host=0");  // the others are clients anyway
    return ChildProcess::Start(
        Agent((*proxy)->port(), node, "2", {"crash-once", "3", "7", dir.path()}, extra));
  };
  auto a = agent(1);
  auto b = agent(2);
  ProcessResult ra = a->Wait(absl::Seconds(60));
  ProcessResult rb = b->Wait(absl::Seconds(60));
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  std::printf(
      "[ slow link ] 100 ms each way with stalls: job formed, crashed and restarted in %.1f ms\n",
      absl::ToDoubleMilliseconds(absl::Now() - start));
  EXPECT_TRUE(AllExist(dir, {"ran.0.1", "ran.1.1", "ran.2.1", "ran.3.1"}));
  kill(master->pid(), SIGTERM);
  EXPECT_EQ(master->Wait(absl::Seconds(10)).exit_code, 0);
}

TEST(MultiNode, WrongTokenIsRefusedWithStatus75AndTheSettingToCheck) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  const std::string token = dir.Write("token", "right\n");
  auto master = ChildProcess::Start(
      {kMaster, "--host=127.0.0.1", absl::StrCat("--port=", port), "--token-file=" + token});
  ProcessResult r = RunProcess(Agent(port, 1, "2", {"env", dir.path()}, {"--rdzv-conf=is_host=0"}),
                               {{"DDPRUN_RDZV_TOKEN", "wrong"}}, absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_THAT(r.err, HasSubstr("the join token does not match"));
  EXPECT_THAT(r.err, HasSubstr("DDPRUN_RDZV_TOKEN"));
  kill(master->pid(), SIGTERM);
}

// b, of another job on a's port, is refused at once, told which job the port's master runs
// and to use a port of its own; a, the host, says whom it refused and why, at the default level.
TEST(MultiNode, AnAgentOfAnotherJobIsToldWhichJobThePortsMasterRuns) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  auto a = ChildProcess::Start(Agent(port, 1, "2", {"env", dir.path()}));
  ASSERT_TRUE(WaitUntil(
      [&] { return a->ErrSoFar().find("has no token") != std::string::npos; },  // it hosts
      absl::Seconds(60)))
      << a->ErrSoFar();
  std::vector<std::string> other = Agent(port, 2, "2", {"env", dir.path()});
  for (auto& arg : other) {
    if (arg == "--rdzv-id=job") arg = "--rdzv-id=another-job";
  }
  ProcessResult rb = RunProcess(other, {}, absl::Seconds(60));
  EXPECT_EQ(rb.exit_code, 75) << rb.err;
  EXPECT_THAT(rb.err, HasSubstr("this port's rendezvous master runs another job: run 'job', "
                                "since "));
  EXPECT_THAT(rb.err, HasSubstr("gathering round 0 with 1 node(s) joined"));
  EXPECT_THAT(rb.err, HasSubstr("give that job a port of its own"));
  EXPECT_TRUE(WaitUntil(
      [&] {
        return a->ErrSoFar().find("This node asked for run 'another-job'") != std::string::npos;
      },
      absl::Seconds(30)))
      << a->ErrSoFar();
  EXPECT_THAT(a->ErrSoFar(), HasSubstr("refused a session from "));
  kill(a->pid(), SIGTERM);
  EXPECT_EQ(a->Wait(absl::Seconds(30)).exit_code, 128 + SIGTERM);
}

TEST(MultiNode, JoinTimeoutNamesWhoCameAndWhatWasExpected) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  ProcessResult r =
      RunProcess(Agent(port, 1, "2:3", {"env", dir.path()}, {"--rdzv-conf=join_timeout=1"}), {},
                 absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_THAT(r.err,
              HasSubstr("1 of the at least 2 nodes needed (--nnodes=2:3) joined: 127.0.0.1"));
}

// A static node whose node 0 is not up: its waiting line names the options it was given,
// --master-addr and --master-port, not an "endpoint" it never typed.
TEST(MultiNode, AStaticNodeWaitingForNodeZeroNamesMasterAddrAndPort) {
  const int port = FreeLoopbackPort();
  ProcessResult r = RunProcess(
      DdprunWithTestWorker({"--nnodes=2", "--node-rank=1", "--master-addr=127.0.0.1",
                            absl::StrCat("--master-port=", port), "--rdzv-conf=join_timeout=6"},
                           {"exit", "0"}),
      {}, absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("nothing listens on port ", port, " of 127.0.0.1")));
  EXPECT_THAT(r.err, HasSubstr("are --master-addr and --master-port right?"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("endpoint right")));
}

TEST(MultiNode, StaticBackendTwoByTwo) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  auto node = [&](int rank) {
    return DdprunWithTestWorker(
        {"--nnodes=2", "--nproc-per-node=2", absl::StrCat("--node-rank=", rank),
         "--master-addr=127.0.0.1", absl::StrCat("--master-port=", port),
         absl::StrCat("--local-addr=127.0.0.", 9 - rank)},
        {"env", dir.path()});
  };
  // Node 1 first, with the higher address: --node-rank decides the order, not the address.
  auto b = ChildProcess::Start(node(1));
  auto a = ChildProcess::Start(node(0));
  ProcessResult rb = b->Wait(absl::Seconds(30));
  ProcessResult ra = a->Wait(absl::Seconds(30));
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  auto env = ParseEnvFile(dir / "env.0.0");
  EXPECT_EQ(env["GROUP_RANK"], "0");
  // As torchrun's static workers: the store node 0's agent serves beside the master.
  for (const char* file : {"env.0.0", "env.2.0"}) {
    std::map<std::string, std::string> worker = ParseEnvFile(dir / file);
    EXPECT_EQ(worker["MASTER_ADDR"], "127.0.0.1") << file;
    EXPECT_EQ(worker["MASTER_PORT"], std::to_string(port)) << file;
    EXPECT_EQ(worker["TORCHELASTIC_USE_AGENT_STORE"], "True") << file;
  }
  EXPECT_EQ(ParseEnvFile(dir / "env.3.0")["WORLD_SIZE"], "4");
}

// The review's attack: under the usual 1,024-fd limit (here 128), more idle TCP connections
// than the master has descriptors for. gRPC 1.51's own listener never accepted again after
// that (grpc/grpc#16058); the master's own listener sheds what it cannot hold, says so at
// error level, and serves the next job once the idle connections are gone.
TEST(MultiNode, AMasterOutOfDescriptorsSaysSoAndAcceptsAgainAfterwards) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  auto master = ChildProcess::Start({"/usr/bin/prlimit", "--nofile=128:128", "--", kMaster,
                                     "--host=127.0.0.1", absl::StrCat("--port=", port)});
  ASSERT_TRUE(
      WaitUntil([&] { return master->ErrSoFar().find("listening on") != std::string::npos; },
                absl::Seconds(20)))
      << master->ErrSoFar();
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 200; ++i) {
    UniqueFd fd = ConnectToLoopback(port);
    ASSERT_TRUE(fd.valid()) << "connection " << i;
    idle.push_back(std::move(fd));
  }
  EXPECT_TRUE(WaitUntil(
      [&] {
        return master->ErrSoFar().find("error: out of file descriptors") != std::string::npos;
      },
      absl::Seconds(20)))
      << master->ErrSoFar();
  idle.clear();
  const std::vector<std::string> client = {"--rdzv-conf=is_host=0"};
  auto a = ChildProcess::Start(Agent(port, 1, "2", {"env", dir.path()}, client));
  auto b = ChildProcess::Start(Agent(port, 2, "2", {"env", dir.path()}));  // is_host=0 already
  ProcessResult ra = a->Wait(absl::Seconds(60));
  ProcessResult rb = b->Wait(absl::Seconds(60));
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  kill(master->pid(), SIGTERM);
  master->Wait(absl::Seconds(10));
}

// A master without a token says once what that allows when it listens beyond loopback, and
// is quiet on loopback or with a token.
TEST(MultiNode, AMasterWithoutATokenBeyondLoopbackWarnsOnce) {
  TempDir dir;
  WriteFile(dir / "token", "s3cret\n", 0600);
  const auto warned = [](const std::vector<std::string>& options) {
    const int port = FreeLoopbackPort();
    std::vector<std::string> argv = {kMaster, absl::StrCat("--port=", port)};
    argv.insert(argv.end(), options.begin(), options.end());
    auto master = ChildProcess::Start(argv);
    EXPECT_TRUE(
        WaitUntil([&] { return master->ErrSoFar().find("listening on") != std::string::npos; },
                  absl::Seconds(20)));
    kill(master->pid(), SIGTERM);
    const std::string err = master->Wait(absl::Seconds(10)).err;
    const size_t at = err.find("has no token: anyone who reaches it");
    if (at == std::string::npos) return false;
    // One line a terminal shows whole (it was 400 characters): the rest is in security.md.
    EXPECT_LT(err.find('\n', at) - err.rfind('\n', at), 220u) << err;
    return true;
  };
  EXPECT_TRUE(warned({"--host=0.0.0.0"}));
  EXPECT_FALSE(warned({"--host=127.0.0.1"}));
  EXPECT_FALSE(warned({"--host=0.0.0.0", "--token-file=" + (dir / "token")}));
}

// The review exhausted a non-hosting agent's store with 256 connections: its soft limit.
// Every agent that may serve its workers' store raises its own limit to the hard one; its
// workers keep the limit they were started with.
TEST(MultiNode, EveryAgentThatMayServeTheWorkersStoreRaisesItsOpenFileLimit) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  auto a = ChildProcess::Start(Agent(port, 1, "2", {"wait-signal", dir.path()}));
  std::vector<std::string> low = {"/usr/bin/prlimit", "--nofile=256:8192", "--"};
  std::vector<std::string> other = Agent(port, 2, "2", {"wait-signal", dir.path()});
  low.insert(low.end(), other.begin(), other.end());
  auto b = ChildProcess::Start(low);
  ASSERT_TRUE(WaitUntil(
      [&] {
        return AllExist(dir, {"ready.0", "ready.1", "ready.2", "ready.3"});
      },
      absl::Seconds(30)))
      << a->ErrSoFar() << b->ErrSoFar();
  auto soft_limit = [](int pid) {
    const std::string limits = ReadFile(absl::StrCat("/proc/", pid, "/limits"));
    const size_t at = limits.find("Max open files");
    return at == std::string::npos ? std::string() : limits.substr(at + 26, 21);
  };
  EXPECT_THAT(soft_limit(b->pid()), HasSubstr("8192"));
  // Its workers keep 256.
  int workers = 0;
  const std::string children =
      ReadFile(absl::StrCat("/proc/", b->pid(), "/task/", b->pid(), "/children"));
  for (absl::string_view child : absl::StrSplit(children, ' ', absl::SkipEmpty())) {
    const std::string pid(child);
    const std::string argv = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
    if (argv.substr(0, argv.find('\0')).find("test_worker") == std::string::npos) {
      continue;  // the orphan guard: ddprun's own command line
    }
    ++workers;
    EXPECT_THAT(soft_limit(std::stoi(pid)), HasSubstr("256")) << pid;
  }
  EXPECT_EQ(workers, 2);
  for (auto* agent : {a.get(), b.get()}) ::kill(agent->pid(), SIGTERM);
  for (auto* agent : {a.get(), b.get()}) agent->Wait(absl::Seconds(30));
}

}  // namespace
}  // namespace ddprun::testing
