// ddprun across hosts that behave like separate machines: each agent in its own network
// namespace with its own address, the master embedded in host 1's agent or alone as
// ddprun-master. Each scenario asserts the outcome, prints what it measured ("[ netns ]"
// lines), and checks that nothing of the test is left on any host.

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "tests/netns/netns_cluster.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"
#include "tests/support/freezer.h"
#include "tests/support/master_outage.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kPort = 29400;
const std::string kMaster = DDPRUN_MASTER_BIN;

class NetnsTest : public ::testing::Test {
 protected:
  void MakeHosts(int hosts) {
    auto cluster = NetnsCluster::Create(hosts);
    if (!cluster.ok()) GTEST_SKIP() << "no network namespaces here: " << cluster.status().message();
    cluster_ = std::move(*cluster);
  }

  // An agent of job `run_id` on `host`, its master at host `master_host`; two workers each.
  // The command line a user types: no --local-addr, and the host's name is loopback there.
  // Agents on hosts 1-3 of an elastic 2:3 job that notice a silent link within about a
  // second (keep-alive 0.5 s + 0.5 s), once all six workers run (count-starts).
  void StartThreeQuickAgents(std::vector<std::unique_ptr<ChildProcess>>& agents,
                             const std::vector<std::string>& extra = {}) {
    std::vector<std::string> quick = {
        "--rdzv-conf=keep_alive_interval=0.5,heartbeat_timeout=0.5,last_call_timeout=0.2"};
    quick.insert(quick.end(), extra.begin(), extra.end());
    for (int host = 1; host <= 3; ++host) {
      agents.push_back(Agent(host, "2:3", {"count-starts", dir_.path()}, quick));
    }
    ASSERT_TRUE(WaitUntil([&] { return AllLogged(dir_, 0, 6, "started", 1); }, absl::Seconds(30)));
  }

  std::unique_ptr<ChildProcess> Agent(
      int host, const std::string& nnodes, const std::vector<std::string>& worker_args,
      std::vector<std::string> extra = {}, int master_host = 1, const std::string& run_id = "job",
      const std::map<std::string, std::optional<std::string>>& env = {}) {
    std::vector<std::string> options = {
        "--nnodes=" + nnodes, "--nproc-per-node=2", "--rdzv-backend=c10d",
        absl::StrCat("--rdzv-endpoint=", NetnsCluster::Address(master_host), ":", kPort),
        "--rdzv-id=" + run_id};
    options.insert(options.end(), extra.begin(), extra.end());
    return cluster_->Start(host, DdprunWithTestWorker(options, worker_args), env);
  }

  // After a scenario: no process of the test on any host (workers never outlive agents).
  void ExpectHostsEmpty(int hosts) {
    for (int host = 1; host <= hosts; ++host) {
      EXPECT_TRUE(WaitUntil([&] { return cluster_->ProcessesOn(host).empty(); }, absl::Seconds(10)))
          << "processes left on host " << host;
    }
  }

  static void Measure(const std::string& scenario, const std::string& what, absl::Duration d) {
    std::printf("[ netns ] %s: %s %.1f ms\n", scenario.c_str(), what.c_str(),
                absl::ToDoubleMilliseconds(d));
  }

  void FinishWithoutARestart(ChildProcess& a, ChildProcess& b, ChildProcess& master);

  TempDir dir_;
  std::unique_ptr<NetnsCluster> cluster_;
};

TEST_F(NetnsTest, AWorkerCrashOnOneHostRestartsEveryHost) {
  MakeHosts(2);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  auto a = Agent(1, "2", {"crash-once", "3", "7", dir_.path()}, {"--max-restarts=1"});
  auto b = Agent(2, "2", {"crash-once", "3", "7", dir_.path()}, {"--max-restarts=1"});
  ProcessResult ra = a->Wait(absl::Seconds(60));
  ProcessResult rb = b->Wait(absl::Seconds(60));
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_TRUE(FileExists(dir_ / absl::StrCat("ran.", rank, ".1")));
  EXPECT_THAT(ra.err, HasSubstr("rank 3 on node2 failed"));
  ExpectHostsEmpty(2);
}

// A worker killed by a signal on one host (SIGABRT, as a failed assertion does), with no
// restart left: every host stops and exits with 128 + the signal, the root cause named.
TEST_F(NetnsTest, AWorkerKilledByASignalEndsTheJobOnEveryHostWithItsStatus) {
  MakeHosts(2);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  auto a = Agent(1, "2", {"round-env", dir_.path()});
  auto b = Agent(2, "2", {"kill-self", "6"});
  ProcessResult rb = b->Wait(absl::Seconds(60));
  ProcessResult ra = a->Wait(absl::Seconds(60));
  EXPECT_EQ(rb.exit_code, 128 + 6) << rb.err;
  EXPECT_EQ(ra.exit_code, 128 + 6) << ra.err;
  EXPECT_THAT(ra.err, HasSubstr("on node2 failed with exitcode -6"));  // rank 2 or 3
  ExpectHostsEmpty(2);
}

// Every line every worker printed reaches its host's console, none cut or mixed with
// another's (each line is counted whole).
TEST_F(NetnsTest, NoLineAWorkerPrintsIsLost) {
  MakeHosts(2);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  constexpr int kLines = 5000;
  const std::vector<std::string> logs = {"--tee=1", "--log-dir=" + dir_.path()};
  auto a = Agent(1, "2", {"spew", std::to_string(kLines)}, logs);
  auto b = Agent(2, "2", {"spew", std::to_string(kLines)}, logs);
  ProcessResult ra = a->Wait(absl::Seconds(60));
  ProcessResult rb = b->Wait(absl::Seconds(60));
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string& out = rank < 2 ? ra.out : rb.out;
    EXPECT_EQ(CountLinesContaining(out, absl::StrCat("rank ", rank, " line ")), kLines) << rank;
    EXPECT_EQ(CountLinesContaining(out, absl::StrCat("rank ", rank, " line ", kLines - 1)), 1)
        << "the last line of rank " << rank;
  }
  ExpectHostsEmpty(2);
}

// A worker the kernel holds (frozen in a cgroup-v1 freezer group: SIGKILL cannot end it) does
// not wedge its agent: on the stop order after a failure it stops what it can, reports the
// worker unkillable, tells the master it leaves, and exits 69; the other host goes on alone.
TEST_F(NetnsTest, AWedgedWorkerDoesNotWedgeItsAgentTheOtherHostGoesOn) {
  if (!FreezerUsable())
    GTEST_SKIP() << "needs root and the cgroup-v1 freezer (" << kFreezerRoot << ")";
  MakeHosts(2);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  auto a = Agent(1, "1:2", {"count-starts", dir_.path()}, {"--max-restarts=1"});
  auto b = Agent(2, "1:2", {"wedge", dir_.path()},
                 {"--max-restarts=1", "--shutdown-timeout=0.2", "--kill-timeout=1"});
  ASSERT_TRUE(WaitUntil(
      [&] {
        return AllLogged(dir_, 0, 2, "started", 1) && FileExists(dir_ / "ready.3") &&
               FileExists(dir_ / "pid.2");
      },
      absl::Seconds(30)))
      << a->ErrSoFar() << b->ErrSoFar();
  const std::string group = Freeze(ReadFile(dir_ / "pid.2"));
  absl::Cleanup thaw = [&] { ThawAndRemove(group); };  // whatever happens, nothing is left
  ASSERT_FALSE(group.empty()) << "cannot freeze the worker";
  const absl::Time failed = absl::Now();
  WriteFile(dir_ / "fail", "");  // rank 3 exits 1: the round stops on both hosts
  ProcessResult rb = b->Wait(absl::Seconds(30));
  Measure("wedged worker", "its agent out after", absl::Now() - failed);
  EXPECT_EQ(rb.exit_code, 69) << rb.err;
  EXPECT_THAT(rb.err, HasSubstr("rank 2 (local_rank 0, pid "));
  EXPECT_THAT(rb.err, HasSubstr("still running 1s after SIGKILL (--kill-timeout): the node is "
                                "unhealthy; this agent exits without them"));
  // Host 1 hosts the master: it heard why host 2 went, and its workers run on without it.
  ASSERT_TRUE(WaitUntil([&] { return AllLogged(dir_, 0, 2, "started", 2); }, absl::Seconds(30)))
      << a->ErrSoFar();
  EXPECT_THAT(a->ErrSoFar(), HasSubstr("leaves the run: rank 2 (local_rank 0, pid "));
  EXPECT_TRUE(ThawAndRemove(group));  // let it die now
  WriteFile(dir_ / "release", "");
  EXPECT_EQ(a->Wait(absl::Seconds(30)).exit_code, 0);
  ExpectHostsEmpty(2);
}

TEST_F(NetnsTest, AnAgentKilledTheSurvivorsGoOnWithoutIt) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  auto a = Agent(1, "2:3", {"count-starts", dir_.path()});
  auto b = Agent(2, "2:3", {"count-starts", dir_.path()});
  auto c = Agent(3, "2:3", {"count-starts", dir_.path()}, {"--rdzv-conf=last_call_timeout=0.2"});
  ASSERT_TRUE(WaitUntil([&] { return AllLogged(dir_, 0, 6, "started", 1); }, absl::Seconds(30)));
  const absl::Time killed = absl::Now();
  ASSERT_EQ(::kill(c->pid(), SIGKILL), 0);
  ASSERT_TRUE(WaitUntil([&] { return AllLogged(dir_, 0, 4, "started", 2); }, absl::Seconds(30)));
  Measure("agent SIGKILL", "survivors running again after", absl::Now() - killed);
  EXPECT_THAT(ReadFile(dir_ / "starts.3"), HasSubstr("restart=0"));  // no restart spent
  c->Wait(absl::Seconds(10));
  WriteFile(dir_ / "release", "");
  EXPECT_EQ(a->Wait(absl::Seconds(30)).exit_code, 0);
  EXPECT_EQ(b->Wait(absl::Seconds(30)).exit_code, 0);
  ExpectHostsEmpty(3);
}

// Host 3's link goes down: no connection is closed, packets just vanish. Host 3's agent must
// stop its workers on its own (a partitioned node must not train on in a dead round); hosts
// 1 and 2 go on without it; when the link comes back, host 3 rejoins and the job grows.
TEST_F(NetnsTest, APartitionedHostStopsItsWorkersTheOthersGoOnAndItRejoins) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  std::vector<std::unique_ptr<ChildProcess>> agents;
  StartThreeQuickAgents(agents);
  if (HasFatalFailure()) return;
  auto& a = agents[0];
  auto& b = agents[1];
  auto& c = agents[2];
  const absl::Time cut = absl::Now();
  ASSERT_TRUE(cluster_->SetLinkUp(3, false).ok());
  ASSERT_TRUE(WaitUntil([&] { return AllLogged(dir_, 4, 2, "stopped", 1); }, absl::Seconds(30)))
      << "the partitioned host kept its workers running";
  Measure("partition", "cut-off host's workers stopped after", absl::Now() - cut);
  ASSERT_TRUE(WaitUntil([&] { return AllLogged(dir_, 0, 4, "started", 2); }, absl::Seconds(30)));
  Measure("partition", "the other hosts running again after", absl::Now() - cut);
  const absl::Time healed = absl::Now();
  ASSERT_TRUE(cluster_->SetLinkUp(3, true).ok());
  ASSERT_TRUE(WaitUntil([&] { return AllLogged(dir_, 4, 2, "started", 2); }, absl::Seconds(60)))
      << c->ErrSoFar();
  Measure("partition", "healed host back in the job after", absl::Now() - healed);
  WriteFile(dir_ / "release", "");
  EXPECT_EQ(a->Wait(absl::Seconds(30)).exit_code, 0);
  EXPECT_EQ(b->Wait(absl::Seconds(30)).exit_code, 0);
  ProcessResult rc = c->Wait(absl::Seconds(30));
  EXPECT_EQ(rc.exit_code, 0) << rc.err;
  EXPECT_THAT(rc.err, HasSubstr("lost the rendezvous master"));
  ExpectHostsEmpty(3);
}

TEST_F(NetnsTest, ALateJoinerGrowsTheJobWithoutSpendingARestart) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  const std::vector<std::string> quick = {"--rdzv-conf=last_call_timeout=0.2"};
  auto a = Agent(1, "2:3", {"count-starts", dir_.path()}, quick);
  auto b = Agent(2, "2:3", {"count-starts", dir_.path()}, quick);
  ASSERT_TRUE(WaitUntil([&] { return AllLogged(dir_, 0, 4, "started", 1); }, absl::Seconds(30)));
  const absl::Time joined = absl::Now();
  auto c = Agent(3, "2:3", {"count-starts", dir_.path()}, quick);
  ASSERT_TRUE(WaitUntil(
      [&] { return AllLogged(dir_, 0, 6, "started", 1) && AllLogged(dir_, 0, 4, "started", 2); },
      absl::Seconds(30)));
  Measure("late joiner", "all 3 hosts running after", absl::Now() - joined);
  EXPECT_THAT(ReadFile(dir_ / "starts.5"), HasSubstr("restart=0"));
  WriteFile(dir_ / "release", "");
  for (auto* agent : {&a, &b, &c}) EXPECT_EQ((*agent)->Wait(absl::Seconds(30)).exit_code, 0);
  ExpectHostsEmpty(3);
}

// Host 3's link goes down and up three times: each time it stops its workers and comes
// back; the job never spends a restart and ends well.
TEST_F(NetnsTest, AFlappingHostComesBackEachTime) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  std::vector<std::unique_ptr<ChildProcess>> agents;
  StartThreeQuickAgents(agents, {"--max-node-flaps=4"});  // under the limit: back each time
  if (HasFatalFailure()) return;
  auto& c = agents[2];
  for (int flap = 1; flap <= 3; ++flap) {
    SCOPED_TRACE(flap);
    ASSERT_TRUE(cluster_->SetLinkUp(3, false).ok());
    ASSERT_TRUE(
        WaitUntil([&] { return AllLogged(dir_, 4, 2, "stopped", flap); }, absl::Seconds(30)));
    ASSERT_TRUE(cluster_->SetLinkUp(3, true).ok());
    ASSERT_TRUE(
        WaitUntil([&] { return AllLogged(dir_, 4, 2, "started", flap + 1); }, absl::Seconds(60)))
        << c->ErrSoFar();
  }
  EXPECT_EQ(CountLinesContaining(ReadFile(dir_ / "starts.0"), "restart=0"),
            CountLinesContaining(ReadFile(dir_ / "starts.0"), "started"));
  WriteFile(dir_ / "release", "");
  for (auto& agent : agents) EXPECT_EQ(agent->Wait(absl::Seconds(30)).exit_code, 0);
  ExpectHostsEmpty(3);
}

// ddprun-master on a host of its own is killed and started again: the agents on the other
// hosts stop their workers, rejoin, and the run carries on (torchrun's store host is a
// single point of failure).
// After a master outage: the count-starts job on hosts 2 and 3 is released and ends well,
// none of its workers ever restarted, `master` shuts down, and nothing is left anywhere.
void NetnsTest::FinishWithoutARestart(ChildProcess& a, ChildProcess& b, ChildProcess& master) {
  WriteFile(dir_ / "release", "");
  EXPECT_EQ(a.Wait(absl::Seconds(30)).exit_code, 0);
  EXPECT_EQ(b.Wait(absl::Seconds(30)).exit_code, 0);
  ExpectEveryWorkerStartedOnce(dir_, 4);
  ::kill(master.pid(), SIGTERM);
  EXPECT_EQ(master.Wait(absl::Seconds(10)).exit_code, 0);
  ExpectHostsEmpty(3);
}

// The master is not in the data path: ddprun-master on its own host, SIGKILLed and started
// again 3 s later, stops no worker; the agents have their places back in the same round.
TEST_F(NetnsTest, TheMasterOnItsOwnHostKilledAndRestartedStopsNoWorker) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  const std::vector<std::string> master_argv = {kMaster, "--host=" + NetnsCluster::Address(1),
                                                absl::StrCat("--port=", kPort)};
  auto master = cluster_->Start(1, master_argv);
  auto a = Agent(2, "2", {"count-starts", dir_.path()});
  auto b = Agent(3, "2", {"count-starts", dir_.path()});
  ASSERT_TRUE(WaitUntil([&] { return AllLogged(dir_, 0, 4, "started", 1); }, absl::Seconds(30)));
  ASSERT_EQ(::kill(master->pid(), SIGKILL), 0);
  master->Wait(absl::Seconds(10));
  absl::SleepFor(absl::Seconds(3));  // the master is away for 3 s
  const absl::Time restarted = absl::Now();
  auto second = cluster_->Start(1, master_argv);
  ASSERT_TRUE(BothHadTheirPlacesBack(*a, *b, 0, absl::Seconds(30)));
  Measure("master restart", "every agent back in its round after", absl::Now() - restarted);
  FinishWithoutARestart(*a, *b, *second);
}

// The master's host cut off for 5 s (its link down, then up): the agents lose it, but group
// rank 0's store still answers, so their workers go on; healed, each has its place back.
TEST_F(NetnsTest, TheMastersHostCutOffForFiveSecondsStopsNoWorker) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  auto master = cluster_->Start(
      1, {kMaster, "--host=" + NetnsCluster::Address(1), absl::StrCat("--port=", kPort)});
  // Agents notice the silent master within 2 s, so that the 5 s cut is seen.
  const std::vector<std::string> quick = {
      "--rdzv-conf=keep_alive_interval=1,heartbeat_timeout=1,keep_alive_max_attempt=10"};
  auto a = Agent(2, "2", {"count-starts", dir_.path()}, quick);
  auto b = Agent(3, "2", {"count-starts", dir_.path()}, quick);
  ASSERT_TRUE(WaitUntil([&] { return AllLogged(dir_, 0, 4, "started", 1); }, absl::Seconds(30)));
  ASSERT_TRUE(cluster_->SetLinkUp(1, false).ok());
  const absl::Time cut = absl::Now();
  const bool noticed =
      WaitUntil([&] { return SaidWorkersGoOn(*a, 0) && SaidWorkersGoOn(*b, 0); }, absl::Seconds(5));
  absl::SleepFor(absl::Seconds(5) - (absl::Now() - cut));
  ASSERT_TRUE(cluster_->SetLinkUp(1, true).ok());
  const absl::Time healed = absl::Now();
  ASSERT_TRUE(noticed) << a->ErrSoFar() << b->ErrSoFar();
  ASSERT_TRUE(BothHadTheirPlacesBack(*a, *b, 0, absl::Seconds(30)));
  Measure("master's host cut off for 5 s", "every agent back in its round after healing",
          absl::Now() - healed);
  FinishWithoutARestart(*a, *b, *master);
}

TEST_F(NetnsTest, TwoJobsOnOneMasterDoNotSeeEachOther) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  auto master = cluster_->Start(
      1, {kMaster, "--host=" + NetnsCluster::Address(1), absl::StrCat("--port=", kPort)});
  ASSERT_TRUE(
      WaitUntil([&] { return master->ErrSoFar().find("listening on") != std::string::npos; },
                absl::Seconds(20)));
  // Each job has an agent on host 2 and one on host 3.
  TempDir other;
  auto a2 = Agent(2, "2", {"env", dir_.path()}, {}, 1, "job-a");
  auto b2 = Agent(2, "2", {"env", other.path()}, {}, 1, "job-b");
  auto a3 = Agent(3, "2", {"env", dir_.path()}, {}, 1, "job-a");
  auto b3 = Agent(3, "2", {"env", other.path()}, {}, 1, "job-b");
  for (auto* agent : {&a2, &b2, &a3, &b3}) {
    ProcessResult r = (*agent)->Wait(absl::Seconds(30));
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  for (const auto& [folder, run_id] :
       {std::pair<const TempDir*, std::string>{&dir_, "job-a"}, {&other, "job-b"}}) {
    for (int rank = 0; rank < 4; ++rank) {
      auto env = ParseEnvFile(*folder / absl::StrCat("env.", rank, ".0"));
      EXPECT_EQ(env["WORLD_SIZE"], "4") << run_id;
      EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], run_id);
    }
  }
  ::kill(master->pid(), SIGTERM);
  EXPECT_EQ(master->Wait(absl::Seconds(10)).exit_code, 0);
  ExpectHostsEmpty(3);
}

// --- Node health (docs/node-health.md) ---

// When a line of DIR/starts.<rank> (fail-on-host) with `restart=K` was written; nullopt: none.
std::optional<absl::Time> StartedAt(const TempDir& dir, int rank, int restart) {
  for (absl::string_view line :
       absl::StrSplit(ReadFile(dir / absl::StrCat("starts.", rank)), '\n')) {
    if (!absl::StrContains(line, absl::StrCat(" restart=", restart, " "))) continue;
    int64_t us = 0;
    const size_t t = line.find(" t=");
    if (t != absl::string_view::npos && absl::SimpleAtoi(line.substr(t + 3), &us)) {
      return absl::FromUnixMicros(us);
    }
  }
  return std::nullopt;
}

// The last "failing t=..." line of DIR/failures, and how many there are.
std::pair<int, absl::Time> Failures(const TempDir& dir) {
  int count = 0;
  absl::Time last;
  for (absl::string_view line :
       absl::StrSplit(ReadFile(dir / "failures"), '\n', absl::SkipEmpty())) {
    int64_t us = 0;
    if (absl::ConsumePrefix(&line, "failing t=") && absl::SimpleAtoi(line, &us)) {
      ++count;
      last = absl::FromUnixMicros(us);
    }
  }
  return {count, last};
}

// Ranks first..first+n-1 all started their attempt `restart`; the latest of those starts.
std::optional<absl::Time> AllStarted(const TempDir& dir, int first, int n, int restart) {
  absl::Time latest = absl::InfinitePast();
  for (int rank = first; rank < first + n; ++rank) {
    std::optional<absl::Time> at = StartedAt(dir, rank, restart);
    if (!at) return std::nullopt;
    latest = std::max(latest, *at);
  }
  return latest;
}

// Host 3's workers fail whenever they run there. After --max-node-failures=2 failures it is
// excluded (for the rest of the job: its agent exits 69); hosts 1 and 2 go on at once and
// finish; the restarts spent are the 2 failures, the exclusion spent none.
TEST_F(NetnsTest, AHostThatKeepsFailingIsExcludedAndTheJobFinishesWithoutIt) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  const std::vector<std::string> options = {"--max-restarts=5", "--max-node-failures=2",
                                            "--node-cooldown=0",
                                            "--rdzv-conf=last_call_timeout=0.2"};
  const std::vector<std::string> worker = {"fail-on-host", NetnsCluster::HostName(3), dir_.path()};
  auto a = Agent(1, "2:3", worker, options);
  auto b = Agent(2, "2:3", worker, options);
  auto c = Agent(3, "2:3", worker, options);
  ProcessResult rc = c->Wait(absl::Seconds(60));
  EXPECT_EQ(rc.exit_code, 69) << rc.err;
  EXPECT_THAT(rc.err, HasSubstr("the rendezvous keeps this node out of the job: node3: excluded "
                                "for the rest of the job: it was the root cause of 2 failures "
                                "(--max-node-failures=2)"));
  std::optional<absl::Time> running;
  ASSERT_TRUE(WaitUntil([&] { return (running = AllStarted(dir_, 0, 4, 2)).has_value(); },
                        absl::Seconds(30)))
      << a->ErrSoFar();
  const auto [failures, last_failure] = Failures(dir_);
  EXPECT_EQ(failures, 2);
  Measure("node excluded", "2nd failure on node3 to hosts 1-2 running again",
          *running - last_failure);
  WriteFile(dir_ / "release", "");
  ProcessResult ra = a->Wait(absl::Seconds(30));
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(b->Wait(absl::Seconds(30)).exit_code, 0);
  EXPECT_THAT(ra.err, HasSubstr("the job kept 1 node out"));
  EXPECT_THAT(ra.err, HasSubstr("node3: excluded for the rest of the job: it was the root cause "
                                "of 2 failures (--max-node-failures=2) [2 failures]"));
  EXPECT_THAT(ReadFile(dir_ / "starts.0"), Not(HasSubstr("restart=3")));  // K restarts, no more
  ExpectHostsEmpty(3);
}

// The same with a spare: host 4 waits (the job is at --nnodes' maximum) and takes host 3's
// place in the very next round.
TEST_F(NetnsTest, ASpareHostTakesTheExcludedHostsPlaceAtOnce) {
  MakeHosts(4);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  const std::vector<std::string> options = {"--max-restarts=3", "--max-node-failures=1",
                                            "--node-cooldown=0",
                                            "--rdzv-conf=last_call_timeout=0.2"};
  const std::vector<std::string> worker = {"fail-on-host", NetnsCluster::HostName(3), dir_.path()};
  WriteFile(dir_ / "gated", "");  // host 3 fails only once the spare waits (DIR/fail-now)
  auto a = Agent(1, "2:3", worker, options, 1, "job", {{"LOGLEVEL", "INFO"}});
  auto b = Agent(2, "2:3", worker, options);
  auto c = Agent(3, "2:3", worker, options);
  ASSERT_TRUE(WaitUntil([&] { return AllStarted(dir_, 0, 6, 0).has_value(); }, absl::Seconds(30)));
  auto d = Agent(4, "2:3", worker, options);
  ASSERT_TRUE(
      WaitUntil([&] { return absl::StrContains(a->ErrSoFar(), "node4 waits"); }, absl::Seconds(30)))
      << a->ErrSoFar();
  WriteFile(dir_ / "fail-now", "");
  EXPECT_EQ(c->Wait(absl::Seconds(30)).exit_code, 69);
  std::optional<absl::Time> running;
  ASSERT_TRUE(WaitUntil([&] { return (running = AllStarted(dir_, 0, 6, 1)).has_value(); },
                        absl::Seconds(30)))
      << a->ErrSoFar() << d->ErrSoFar();
  EXPECT_THAT(ReadFile(dir_ / "starts.4"), HasSubstr("restart=1 host=node4"));
  Measure("spare", "failure on node3 to hosts 1, 2 and the spare running",
          *running - Failures(dir_).second);
  WriteFile(dir_ / "release", "");
  for (auto* agent : {&a, &b, &d}) {
    ProcessResult r = (*agent)->Wait(absl::Seconds(30));
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  ExpectHostsEmpty(4);
}

// Host 2's health check fails: it never joins, the job starts on hosts 1 and 3 after the last
// call, and every summary shows host 2's check output. Its agent waits out its cooldown and
// ends with the job.
TEST_F(NetnsTest, AHostWhoseHealthCheckFailsNeverJoinsAndTheSummaryShowsWhy) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  const std::vector<std::string> options = {
      "--rdzv-conf=last_call_timeout=0.5",
      "--health-check=[ \"$(hostname)\" != node2 ] || { echo 'GPU 5: 3 uncorrectable ECC "
      "errors' >&2; exit 1; }"};
  const std::vector<std::string> worker = {"fail-on-host", "no-such-host", dir_.path()};
  auto a = Agent(1, "2:3", worker, options);
  const absl::Time started = absl::Now();
  auto b = Agent(2, "2:3", worker, options);
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(b->ErrSoFar(), "keeps this node out"); },
                        absl::Seconds(30)))
      << b->ErrSoFar();
  Measure("health check", "node2's agent started to kept out", absl::Now() - started);
  auto c = Agent(3, "2:3", worker, options);
  ASSERT_TRUE(WaitUntil([&] { return AllStarted(dir_, 0, 4, 0).has_value(); }, absl::Seconds(30)));
  EXPECT_THAT(ReadFile(dir_ / "starts.2"), HasSubstr("host=node3"));
  WriteFile(dir_ / "release", "");
  for (auto* agent : {&a, &b, &c}) {
    ProcessResult r = (*agent)->Wait(absl::Seconds(30));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr("node2: excluded for another "));
    EXPECT_THAT(r.err, HasSubstr("its health check failed: it ended with exit code 1; its last "
                                 "output:\n    GPU 5: 3 uncorrectable ECC errors"));
  }
  EXPECT_FALSE(FileExists(dir_ / "starts.4"));  // never more than 4 ranks
  ExpectHostsEmpty(3);
}

// Host 3's link goes down twice (--max-node-flaps=2): back after the first, excluded at the
// second; hosts 1 and 2 go on.
TEST_F(NetnsTest, AHostWhoseLinkFlapsPastTheLimitIsExcluded) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  std::vector<std::unique_ptr<ChildProcess>> agents;
  StartThreeQuickAgents(agents, {"--max-node-flaps=2", "--node-cooldown=0"});
  if (HasFatalFailure()) return;
  auto& c = agents[2];
  for (int flap = 1; flap <= 2; ++flap) {
    SCOPED_TRACE(flap);
    ASSERT_TRUE(cluster_->SetLinkUp(3, false).ok());
    ASSERT_TRUE(
        WaitUntil([&] { return AllLogged(dir_, 4, 2, "stopped", flap); }, absl::Seconds(30)));
    ASSERT_TRUE(
        WaitUntil([&] { return AllLogged(dir_, 0, 4, "started", flap + 1); }, absl::Seconds(30)));
    ASSERT_TRUE(cluster_->SetLinkUp(3, true).ok());
    if (flap == 1) {
      ASSERT_TRUE(WaitUntil([&] { return AllLogged(dir_, 4, 2, "started", 2); }, absl::Seconds(60)))
          << c->ErrSoFar();
    }
  }
  ProcessResult rc = c->Wait(absl::Seconds(60));
  EXPECT_EQ(rc.exit_code, 69) << rc.err;
  EXPECT_THAT(rc.err, HasSubstr("its connection was lost 2 times while it ran in a round "
                                "(--max-node-flaps=2)"));
  WriteFile(dir_ / "release", "");
  for (int i = 0; i < 2; ++i) {
    ProcessResult r = agents[i]->Wait(absl::Seconds(30));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr("node3: excluded for the rest of the job"));
  }
  EXPECT_EQ(CountLinesContaining(ReadFile(dir_ / "starts.0"), "restart=0"),
            CountLinesContaining(ReadFile(dir_ / "starts.0"), "started"))
      << "neither flaps nor the exclusion spend a restart";
  ExpectHostsEmpty(3);
}

// Host 3's check fails once: it is kept out for --node-cooldown=1, then checks again, passes,
// and the job takes it in (a membership change: no restart spent).
TEST_F(NetnsTest, ACooldownEndsAndTheNodeIsAdmittedAgainInTheNextRound) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  const std::vector<std::string> options = {
      "--rdzv-conf=last_call_timeout=0.2", "--node-cooldown=1",
      absl::StrCat("--health-check=[ \"$(hostname)\" != node3 ] || [ -e ", dir_.path(),
                   "/healed ] || { touch ", dir_.path(),
                   "/healed; echo 'NIC down' >&2; exit 1; }")};
  auto a = Agent(1, "2:3", {"count-starts", dir_.path()}, options);
  auto b = Agent(2, "2:3", {"count-starts", dir_.path()}, options);
  auto c = Agent(3, "2:3", {"count-starts", dir_.path()}, options);
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(c->ErrSoFar(), "keeps this node out"); },
                        absl::Seconds(30)))
      << c->ErrSoFar();
  const absl::Time out = absl::Now();
  ASSERT_TRUE(WaitUntil([&] { return AllLogged(dir_, 0, 6, "started", 1); }, absl::Seconds(30)))
      << c->ErrSoFar();
  Measure("cooldown", "node3 kept out to in the job (cooldown 1 s)", absl::Now() - out);
  EXPECT_THAT(ReadFile(dir_ / "starts.5"), HasSubstr("restart=0"));
  WriteFile(dir_ / "release", "");
  for (auto* agent : {&a, &b, &c}) {
    ProcessResult r = (*agent)->Wait(absl::Seconds(30));
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  ExpectHostsEmpty(3);
}

// Host 1 hosts the master and its check fails, for the rest of the job: it never runs
// workers, but its agent serves the master to the others until they finish, then exits 69.
TEST_F(NetnsTest, AnExcludedHostThatHostsTheMasterServesItUntilTheOthersFinish) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  const std::vector<std::string> options = {"--rdzv-conf=last_call_timeout=0.2",
                                            "--node-cooldown=0",
                                            "--health-check=[ \"$(hostname)\" != node1 ] || { echo "
                                            "'scratch disk read-only' >&2; exit 1; }"};
  const std::vector<std::string> worker = {"fail-on-host", "no-such-host", dir_.path()};
  auto a = Agent(1, "2:3", worker, options);
  // Host 1 is out before anyone else has come: it must not take the master with it.
  ASSERT_TRUE(WaitUntil([&] { return absl::StrContains(a->ErrSoFar(), "serving it until"); },
                        absl::Seconds(30)))
      << a->ErrSoFar();
  EXPECT_THAT(a->ErrSoFar(), HasSubstr("run 'job': node1: excluded for the rest of the job"));
  auto b = Agent(2, "2:3", worker, options);
  auto c = Agent(3, "2:3", worker, options);
  ASSERT_TRUE(WaitUntil([&] { return AllStarted(dir_, 0, 4, 0).has_value(); }, absl::Seconds(30)))
      << a->ErrSoFar();
  WriteFile(dir_ / "release", "");
  for (auto* agent : {&b, &c}) {
    ProcessResult r = (*agent)->Wait(absl::Seconds(30));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr("scratch disk read-only"));
  }
  ProcessResult ra = a->Wait(absl::Seconds(30));
  EXPECT_EQ(ra.exit_code, 69) << ra.err;
  ExpectHostsEmpty(3);
}

// An operator on a third host, where the nodes' names do not resolve, asks the master how
// the job is (its table, and the status page's JSON over HTTP), then stops it: every host
// exits 0, nothing is left.
TEST_F(NetnsTest, AnOperatorOnAnotherHostSeesTheJobAndStopsIt) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  const std::map<std::string, std::optional<std::string>> token = {
      {"DDPRUN_RDZV_TOKEN", "job-secret"}};
  auto a = Agent(1, "2", {"count-starts", dir_.path()}, {"--metrics-port=9400"}, 1, "job", token);
  auto b = Agent(2, "2", {"count-starts", dir_.path()}, {}, 1, "job", token);
  ASSERT_TRUE(WaitUntil([&] { return AllLogged(dir_, 0, 4, "started", 1); }, absl::Seconds(30)));
  const std::string endpoint =
      absl::StrCat("--rdzv-endpoint=", NetnsCluster::Address(1), ":", kPort);
  ProcessResult status = cluster_->Start(3, {kDdprun, "status", endpoint, "--rdzv-id=job"}, token)
                             ->Wait(absl::Seconds(30));
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("run 'job': running, round 0, world size 4"));
  EXPECT_THAT(status.out, HasSubstr("node1 "));
  EXPECT_THAT(status.out, HasSubstr("node2 "));
  // The page's JSON, from the operator's host, as a browser there would fetch it.
  ProcessResult page =
      cluster_
          ->Start(3, {"/usr/bin/python3", "-c",
                      absl::StrCat("import urllib.request; print(urllib.request.urlopen('http://",
                                   NetnsCluster::Address(1),
                                   ":9400/api/v1/status', timeout=10).read().decode())")})
          ->Wait(absl::Seconds(30));
  ASSERT_EQ(page.exit_code, 0) << page.err;
  EXPECT_THAT(page.out, HasSubstr("\"host\":\"node2\""));
  const absl::Time asked = absl::Now();
  ProcessResult stop =
      cluster_
          ->Start(3, {kDdprun, "stop", endpoint, "--rdzv-id=job", "--reason=node maintenance"},
                  token)
          ->Wait(absl::Seconds(30));
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  Measure("ddprun stop", "answered after", absl::Now() - asked);
  for (auto* agent : {&a, &b}) {
    ProcessResult r = (*agent)->Wait(absl::Seconds(30));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr(": node maintenance; exiting 0"));
  }
  Measure("ddprun stop", "every agent exited 0 within", absl::Now() - asked);
  EXPECT_TRUE(AllLogged(dir_, 0, 4, "stopped", 1));
  ExpectHostsEmpty(3);
}

}  // namespace
}  // namespace ddprun::testing
