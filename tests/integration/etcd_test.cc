// The etcd-v3 backend against a real etcd (Debian's etcd-server), one member on loopback:
// agents as separate processes on one machine, each with its own --local-addr so that they
// are told apart, and the command lines users type otherwise (docs/etcd.md). The same cases
// without --local-addr, on hosts whose names do not resolve across hosts, are the netns
// tests (tests/netns/etcd_netns_test.cc, ddp_across_hosts_test.cc's etcd form).

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"
#include "tests/support/etcd_server.h"
#include "tests/support/test_certificates.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// One agent of run `run` on loopback address 127.0.0.<node>, two workers.
std::vector<std::string> EtcdAgent(const EtcdServer& etcd, const std::string& run, int node,
                                   const std::string& nnodes, std::vector<std::string> worker_args,
                                   const std::string& conf = "") {
  std::vector<std::string> options = {
      "--nnodes=" + nnodes,     "--nproc-per-node=2",
      "--rdzv-backend=etcd-v3", "--rdzv-endpoint=" + etcd.endpoint(),
      "--rdzv-id=" + run,       absl::StrCat("--local-addr=127.0.0.", node),
      "--max-restarts=3"};
  if (!conf.empty()) options.push_back("--rdzv-conf=" + conf);
  return DdprunWithTestWorker(options, worker_args);
}

const std::map<std::string, std::optional<std::string>> kInfo = {{"LOGLEVEL", "INFO"}};

bool AllExist(const TempDir& dir, const std::vector<std::string>& names) {
  for (const auto& name : names) {
    if (!FileExists(dir / name)) return false;
  }
  return true;
}

bool SaysItLeads(const ChildProcess& agent, const std::string& run) {
  return absl::StrContains(agent.ErrSoFar(), "this node leads run '" + run + "'");
}

std::vector<std::string> EnvFiles(int ranks, int round) {
  std::vector<std::string> names;
  for (int rank = 0; rank < ranks; ++rank) names.push_back(absl::StrCat("env.", rank, ".r", round));
  return names;
}

TEST(EtcdV3, TwoNodesGetTheirRanksFromTheElectedLeaderAndTheRunsKeysGoWithIt) {
  std::unique_ptr<EtcdServer> etcd = EtcdServer::Start();
  ASSERT_NE(etcd, nullptr);
  TempDir dir;
  auto a = ChildProcess::Start(EtcdAgent(*etcd, "job", 1, "2", {"round-env", dir.path()}), kInfo);
  auto b = ChildProcess::Start(EtcdAgent(*etcd, "job", 2, "2", {"round-env", dir.path()}), kInfo);
  ASSERT_TRUE(WaitUntil([&] { return AllExist(dir, EnvFiles(4, 0)); }, absl::Seconds(30)))
      << a->ErrSoFar() << b->ErrSoFar();
  std::set<std::string> ranks, group_ranks, masters, stores;
  for (const std::string& file : EnvFiles(4, 0)) {
    auto env = ParseEnvFile(dir / file);
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "0");
    ranks.insert(env["RANK"]);
    group_ranks.insert(env["GROUP_RANK"]);
    masters.insert(env["MASTER_ADDR"] + ":" + env["MASTER_PORT"]);
    stores.insert(env["DDPRUN_STORE_ADDR"]);
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1", "2", "3"}));
  EXPECT_EQ(group_ranks, (std::set<std::string>{"0", "1"}));
  EXPECT_EQ(masters.size(), 1u) << "one MASTER_ADDR:MASTER_PORT for every worker";
  ASSERT_EQ(stores.size(), 1u);
  // The leader's master, at the address its agent was given (--local-addr).
  const int leading = etcd->LeadingNode("job");
  ASSERT_TRUE(leading == 1 || leading == 2) << leading;
  const bool a_leads = leading == 1;
  EXPECT_TRUE(WaitUntil([&] { return SaysItLeads(a_leads ? *a : *b, "job"); }, absl::Seconds(10)))
      << "the leader says so";
  EXPECT_FALSE(SaysItLeads(a_leads ? *b : *a, "job")) << "one leader";
  // Either may host the master: each warns of a job without a token, as c10d's host does.
  for (auto* agent : {a.get(), b.get()}) {
    EXPECT_THAT(agent->ErrSoFar(), HasSubstr("has no token: anyone who reaches it can join or end "
                                             "the run; set DDPRUN_RDZV_TOKEN, with TLS, on every "
                                             "node"));
  }
  EXPECT_EQ(stores.begin()->rfind(a_leads ? "127.0.0.1:" : "127.0.0.2:", 0), 0u) << *stores.begin();
  // While the run goes on, its leader's key is there, under its prefix.
  EXPECT_THAT(etcd->Keys("/ddprun/job/"), HasSubstr("/ddprun/job/leader"));
  // `ddprun status` finds the leader's master through etcd.
  const std::vector<std::string> status = {kDdprun, "status", "--rdzv-backend=etcd-v3",
                                           "--rdzv-endpoint=" + etcd->endpoint(), "--rdzv-id=job"};
  ProcessResult shown = RunProcess(status, {}, absl::Seconds(30));
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("run 'job': running, round 0, world size 4, nodes 2"));
  EXPECT_THAT(shown.out, HasSubstr("127.0.0.2"));
  WriteFile(dir / "release", "");
  ProcessResult ra = a->Wait(absl::Seconds(30)), rb = b->Wait(absl::Seconds(30));
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  // An ended run leaves nothing in etcd, and status says where it looked.
  EXPECT_EQ(etcd->Keys("/ddprun/"), "");
  ProcessResult gone = RunProcess(status, {}, absl::Seconds(30));
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, HasSubstr("run 'job' has no leader in etcd at " + etcd->endpoint()));
}

TEST(EtcdV3, TheLeadersAgentKilledTheOthersGoOnUnderANewLeaderAtOnce) {
  std::unique_ptr<EtcdServer> etcd = EtcdServer::Start();
  ASSERT_NE(etcd, nullptr);
  TempDir dir;
  // A lease of 20 s: a new leader found by waiting it out would come too late for the check
  // below; the others notice that nothing listens at the leader's address any more.
  const std::string conf = "lease_ttl=20";
  std::vector<std::unique_ptr<ChildProcess>> agents;
  for (int node = 1; node <= 3; ++node) {
    agents.push_back(ChildProcess::Start(
        EtcdAgent(*etcd, "job", node, "2:3", {"round-env", dir.path()}, conf), kInfo));
  }
  ASSERT_TRUE(WaitUntil([&] { return AllExist(dir, EnvFiles(6, 0)); }, absl::Seconds(30)));
  const int leader = etcd->LeadingNode("job") - 1;
  ASSERT_GE(leader, 0) << "etcd names one agent's master";
  const std::string old_key = etcd->Ctl({"get", "/ddprun/job/leader", "--print-value-only"}).out;
  const absl::Time killed = absl::Now();
  ASSERT_EQ(::kill(agents[leader]->pid(), SIGKILL), 0);
  agents[leader]->Wait(absl::Seconds(10));
  ASSERT_TRUE(WaitUntil([&] { return AllExist(dir, EnvFiles(4, 1)); }, absl::Seconds(30)))
      << agents[(leader + 1) % 3]->ErrSoFar() << agents[(leader + 2) % 3]->ErrSoFar();
  // The lost node's place is looked for for the grace (5 s), then the others go on.
  EXPECT_LT(absl::Now() - killed, absl::Seconds(15))
      << "well before the 20 s lease ran out: " << agents[(leader + 1) % 3]->ErrSoFar()
      << agents[(leader + 2) % 3]->ErrSoFar();
  for (const std::string& file : EnvFiles(4, 1)) {
    auto env = ParseEnvFile(dir / file);
    EXPECT_EQ(env["WORLD_SIZE"], "4") << file;
    EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "0") << "a node lost spends no restart";
  }
  const auto new_leaders = [&] {
    int count = 0;
    for (int i = 0; i < 3; ++i) count += i != leader && SaysItLeads(*agents[i], "job");
    return count;
  };
  WaitUntil([&] { return new_leaders() > 0; }, absl::Seconds(10));
  // The new leader's master listens for resumes for the grace (5 s): the round they prove
  // lacks the killed node's place, so it is not taken up, and they form the next one (round 1
  // above). Which words each survivor read depends on when its resume came (not taken up, or
  // ended while it was away): the outcome is what is checked.
  EXPECT_EQ(new_leaders(), 1);
  EXPECT_NE(etcd->Ctl({"get", "/ddprun/job/leader", "--print-value-only"}).out, old_key);
  WriteFile(dir / "release", "");
  for (int i = 0; i < 3; ++i) {
    if (i == leader) continue;
    ProcessResult done = agents[i]->Wait(absl::Seconds(30));
    EXPECT_EQ(done.exit_code, 0) << done.err;
  }
  EXPECT_EQ(etcd->Keys("/ddprun/"), "");
}

TEST(EtcdV3, TwoRunsOnOneEtcdKeepApart) {
  std::unique_ptr<EtcdServer> etcd = EtcdServer::Start();
  ASSERT_NE(etcd, nullptr);
  TempDir alpha_dir, beta_dir;
  std::vector<std::unique_ptr<ChildProcess>> agents;
  for (int node = 1; node <= 2; ++node) {
    agents.push_back(
        ChildProcess::Start(EtcdAgent(*etcd, "alpha", node, "2", {"round-env", alpha_dir.path()})));
    agents.push_back(ChildProcess::Start(
        EtcdAgent(*etcd, "beta", node + 2, "2", {"round-env", beta_dir.path()})));
  }
  for (const TempDir* dir : {&alpha_dir, &beta_dir}) {
    ASSERT_TRUE(WaitUntil([&] { return AllExist(*dir, EnvFiles(4, 0)); }, absl::Seconds(30)));
    EXPECT_EQ(ParseEnvFile(*dir / "env.0.r0")["WORLD_SIZE"], "4");
  }
  EXPECT_NE(ParseEnvFile(alpha_dir / "env.0.r0")["TORCHELASTIC_RUN_ID"],
            ParseEnvFile(beta_dir / "env.0.r0")["TORCHELASTIC_RUN_ID"]);
  EXPECT_THAT(etcd->Keys("/ddprun/"), HasSubstr("/ddprun/alpha/leader"));
  EXPECT_THAT(etcd->Keys("/ddprun/"), HasSubstr("/ddprun/beta/leader"));
  WriteFile(alpha_dir / "release", "");
  WriteFile(beta_dir / "release", "");
  for (auto& agent : agents) {
    ProcessResult done = agent->Wait(absl::Seconds(30));
    EXPECT_EQ(done.exit_code, 0) << done.err;
  }
  EXPECT_EQ(etcd->Keys("/ddprun/"), "");
}

TEST(EtcdV3, AWrongPasswordIsRefusedWithTheSettingsToCheck) {
  std::unique_ptr<EtcdServer> etcd = EtcdServer::Start();
  ASSERT_NE(etcd, nullptr);
  ASSERT_TRUE(etcd->EnableAuth("trainer", "right horse", "/ddprun/"));
  TempDir dir;
  WriteFile(dir / "wrong", "battery staple\n", 0600);
  WriteFile(dir / "right", "right horse\n", 0600);
  WriteFile(dir / "release", "");
  const std::string quick = "last_call_timeout=0.2,etcd_user=trainer,etcd_password_file=";
  ProcessResult refused = RunProcess(
      EtcdAgent(*etcd, "job", 1, "1:2", {"round-env", dir.path()}, quick + (dir / "wrong")), {},
      absl::Seconds(30));
  EXPECT_EQ(refused.exit_code, 75) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("authentication failed"));
  EXPECT_THAT(refused.err, HasSubstr("check --rdzv-conf etcd_user and etcd_password_file"));
  ProcessResult let_in = RunProcess(
      EtcdAgent(*etcd, "job", 1, "1:2", {"round-env", dir.path()}, quick + (dir / "right")), {},
      absl::Seconds(30));
  EXPECT_EQ(let_in.exit_code, 0) << let_in.err;
  EXPECT_TRUE(FileExists(dir / "env.1.r0"));
  EXPECT_EQ(etcd->Keys("/ddprun/"), "");
}

TEST(EtcdV3, TorchrunsEtcdNamesWorkOnTheV3ApiAndSaySo) {
  std::unique_ptr<EtcdServer> etcd = EtcdServer::Start();
  ASSERT_NE(etcd, nullptr);
  for (const char* name : {"etcd", "etcd-v2"}) {
    ProcessResult done =
        RunProcess(DdprunWithTestWorker({"--nnodes=1:2", "--rdzv-backend=" + std::string(name),
                                         "--rdzv-endpoint=" + etcd->endpoint(), "--rdzv-id=job",
                                         "--rdzv-conf=last_call_timeout=0.2"},
                                        {"exit", "0"}),
                   {}, absl::Seconds(30));
    EXPECT_EQ(done.exit_code, 0) << done.err;
    EXPECT_THAT(done.err, HasSubstr(absl::StrCat("--rdzv-backend=", name,
                                                 " uses etcd's v3 API (etcd 3.4 or later)")));
  }
  ProcessResult v3 =
      RunProcess(DdprunWithTestWorker({"--nnodes=1:2", "--rdzv-backend=etcd-v3",
                                       "--rdzv-endpoint=" + etcd->endpoint(), "--rdzv-id=job",
                                       "--rdzv-conf=last_call_timeout=0.2"},
                                      {"exit", "0"}),
                 {}, absl::Seconds(30));
  EXPECT_EQ(v3.exit_code, 0) << v3.err;
  EXPECT_THAT(v3.err, Not(HasSubstr("v3 API")));
}

// torchrun's one-node etcd command line: the workers meet through a store of their own, and
// nothing listens on (or is refused at) etcd's port, which etcd holds. Either spelling.
TEST(EtcdV3, AOneNodeJobServesNothingOnEtcdsPort) {
  std::unique_ptr<EtcdServer> etcd = EtcdServer::Start();
  ASSERT_NE(etcd, nullptr);
  const std::string etcd_port = etcd->endpoint().substr(etcd->endpoint().rfind(':') + 1);
  for (const std::string backend : {"etcd", "etcd-v3"}) {
    TempDir dir;
    ProcessResult done = RunProcess(
        DdprunWithTestWorker({"--nnodes=1", "--nproc-per-node=2", "--rdzv_backend=" + backend,
                              "--rdzv_endpoint=localhost:" + etcd_port},
                             {"env", dir.path()}),
        {}, absl::Seconds(60));
    EXPECT_EQ(done.exit_code, 0) << backend << ": " << done.err;
    for (int rank = 0; rank < 2; ++rank) {
      auto env = ParseEnvFile(dir / absl::StrCat("env.", rank, ".0"));
      EXPECT_EQ(env["WORLD_SIZE"], "2") << backend;
      EXPECT_NE(env["MASTER_PORT"], etcd_port) << backend;
      EXPECT_NE(env["MASTER_PORT"], "") << backend;
    }
  }
  EXPECT_EQ(etcd->Ctl({"endpoint", "health"}).exit_code, 0) << "etcd still serves its port";
}

TEST(EtcdV3, NoEtcdAtTheEndpointIsSaidAndTheJoinTimeoutEndsTheWait) {
  const std::string nothing = absl::StrCat("127.0.0.1:", FreeLoopbackPort());
  ProcessResult done = RunProcess(
      DdprunWithTestWorker({"--nnodes=2", "--rdzv-backend=etcd-v3", "--rdzv-endpoint=" + nothing,
                            "--rdzv-id=job", "--rdzv-conf=join_timeout=1,keep_alive_interval=0.5"},
                           {"exit", "0"}),
      {}, absl::Seconds(30));
  EXPECT_EQ(done.exit_code, 75) << done.err;
  EXPECT_THAT(done.err, HasSubstr("etcd does not answer (etcd read failed (" + nothing));
  EXPECT_THAT(done.err, HasSubstr("the run's leader, elected in etcd at " + nothing));
}

// The leader keeps what its master must not forget under the run's prefix (restarts spent,
// each node's failures and exclusions), and the next leader takes it over: after the leader's
// agent is killed, the new leader's master still counts the failure node 2 caused.
TEST(EtcdV3, TheNextLeaderTakesOverWhatTheLastOneRemembered) {
  std::unique_ptr<EtcdServer> etcd = EtcdServer::Start();
  ASSERT_NE(etcd, nullptr);
  TempDir dir;
  WriteFile(dir / "pause.1", "");  // restart 1's rank 1 waits for go.1
  const auto agent = [&](int node) {
    return ChildProcess::Start(
        DdprunWithTestWorker({"--nnodes=2:3", "--nproc-per-node=1", "--rdzv-backend=etcd-v3",
                              "--rdzv-endpoint=" + etcd->endpoint(), "--rdzv-id=job",
                              absl::StrCat("--local-addr=127.0.0.", node), "--max-restarts=3",
                              "--max-node-failures=2", "--rdzv-conf=last_call_timeout=0.5"},
                             {"crash-until", "2", dir.path()}),
        kInfo);
  };
  std::vector<std::unique_ptr<ChildProcess>> agents;
  agents.push_back(agent(1));  // it leads: the others start once it does
  ASSERT_TRUE(WaitUntil(
      [&] { return agents[0]->ErrSoFar().find("this node leads run 'job'") != std::string::npos; },
      absl::Seconds(20)));
  agents.push_back(agent(2));
  agents.push_back(agent(3));
  // Rank 1 (node 2, group rank 1) failed in restart 0; in restart 1 it waits.
  ASSERT_TRUE(WaitUntil([&] { return FileExists(dir / "at.1"); }, absl::Seconds(30)))
      << agents[0]->ErrSoFar();
  const std::vector<std::string> status = {
      kDdprun,         "status", "--rdzv-backend=etcd-v3", "--rdzv-endpoint=" + etcd->endpoint(),
      "--rdzv-id=job", "--json"};
  const auto node2_caused_one = [&] {
    const std::string json = RunProcess(status, {}, absl::Seconds(30)).out;
    return json.find(R"("host": "127.0.0.2")") != std::string::npos &&
           json.find(R"("restarts_caused": 1)") != std::string::npos;
  };
  EXPECT_TRUE(node2_caused_one()) << RunProcess(status, {}, absl::Seconds(30)).out;
  // The state key is written at round 0 already; wait for the write that holds node 2's
  // failure (its host's record), which the leader makes within about 100 ms.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return etcd->Ctl({"get", "--print-value-only", "/ddprun/job/state"})
                   .out.find("127.0.0.2") != std::string::npos;
      },
      absl::Seconds(10)))
      << "the leader keeps its memory in etcd: " << agents[0]->ErrSoFar();
  ASSERT_EQ(::kill(agents[0]->pid(), SIGKILL), 0);
  agents[0]->Wait(absl::Seconds(10));
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (int i = 1; i <= 2; ++i) {
          if (agents[i]->ErrSoFar().find("with what the last leader remembered (") !=
              std::string::npos) {
            return true;
          }
        }
        return false;
      },
      absl::Seconds(30)));
  EXPECT_THAT(agents[1]->ErrSoFar() + agents[2]->ErrSoFar(), HasSubstr("1 restarts spent)"));
  EXPECT_TRUE(WaitUntil(node2_caused_one, absl::Seconds(20)))
      << "the new leader's master counts node 2's failure: "
      << RunProcess(status, {}, absl::Seconds(30)).out;
  WriteFile(dir / "go.1", "");
  for (int i = 1; i <= 2; ++i) {
    ProcessResult done = agents[i]->Wait(absl::Seconds(60));
    EXPECT_EQ(done.exit_code, 0) << done.err;
  }
  EXPECT_EQ(etcd->Keys("/ddprun/"), "");
}

// Ctrl-C on every node at once ends the job: the leader, whose master sees every session
// end, removes the run's keys, so that the same command again starts a new run.
TEST(EtcdV3, AJobInterruptedOnEveryNodeLeavesNothingInEtcd) {
  std::unique_ptr<EtcdServer> etcd = EtcdServer::Start();
  ASSERT_NE(etcd, nullptr);
  TempDir dir;
  auto a = ChildProcess::Start(EtcdAgent(*etcd, "job", 1, "2", {"wait-signal", dir.path()}), kInfo);
  auto b = ChildProcess::Start(EtcdAgent(*etcd, "job", 2, "2", {"wait-signal", dir.path()}), kInfo);
  ASSERT_TRUE(WaitUntil(
      [&] {
        return AllExist(dir, {"ready.0", "ready.1", "ready.2", "ready.3"});
      },
      absl::Seconds(30)))
      << a->ErrSoFar() << b->ErrSoFar();
  ASSERT_TRUE(WaitUntil(
      [&] { return etcd->Keys("/ddprun/job/").find("/ddprun/job/state") != std::string::npos; },
      absl::Seconds(10)));
  ASSERT_EQ(::kill(a->pid(), SIGINT), 0);
  ASSERT_EQ(::kill(b->pid(), SIGINT), 0);
  ProcessResult ra = a->Wait(absl::Seconds(30)), rb = b->Wait(absl::Seconds(30));
  EXPECT_EQ(ra.exit_code, 130) << ra.err;
  EXPECT_EQ(rb.exit_code, 130) << rb.err;
  EXPECT_EQ(etcd->Keys("/ddprun/"), "") << ra.err << rb.err;
}

// Ctrl-C on one node, then on the other: the first leader leaves its memory to the node
// that goes on, which leads next; when it leaves too, no node is left and the keys go.
TEST(EtcdV3, AJobInterruptedNodeByNodeLeavesNothingInEtcd) {
  std::unique_ptr<EtcdServer> etcd = EtcdServer::Start();
  ASSERT_NE(etcd, nullptr);
  TempDir dir;
  std::vector<std::unique_ptr<ChildProcess>> agents;
  for (int node = 1; node <= 2; ++node) {
    agents.push_back(ChildProcess::Start(
        EtcdAgent(*etcd, "job", node, "2", {"wait-signal", dir.path()}), kInfo));
  }
  ASSERT_TRUE(WaitUntil(
      [&] {
        return AllExist(dir, {"ready.0", "ready.1", "ready.2", "ready.3"});
      },
      absl::Seconds(30)));
  ASSERT_TRUE(WaitUntil(
      [&] { return etcd->Keys("/ddprun/job/").find("/ddprun/job/state") != std::string::npos; },
      absl::Seconds(10)));
  const int leader = etcd->LeadingNode("job") - 1;
  ASSERT_GE(leader, 0) << "etcd names one agent's master";
  const int other = 1 - leader;
  ASSERT_EQ(::kill(agents[leader]->pid(), SIGINT), 0);
  ProcessResult first = agents[leader]->Wait(absl::Seconds(30));
  EXPECT_EQ(first.exit_code, 130) << first.err;
  ASSERT_TRUE(WaitUntil([&] { return SaysItLeads(*agents[other], "job"); }, absl::Seconds(30)))
      << agents[other]->ErrSoFar();
  // The leader that left deleted nothing the next one needs (it did, unfenced, when its
  // lease lapsed while it waited for the other's session: the next one led with no key).
  EXPECT_THAT(etcd->Keys("/ddprun/job/"), HasSubstr("/ddprun/job/state"))
      << "kept for the node that goes on: " << first.err;
  ASSERT_EQ(::kill(agents[other]->pid(), SIGINT), 0);
  ProcessResult second = agents[other]->Wait(absl::Seconds(30));
  EXPECT_EQ(second.exit_code, 130) << second.err;
  EXPECT_EQ(etcd->Keys("/ddprun/"), "") << second.err;
}

// Every node of a job killed (kill -9): nothing removes its state from etcd. The same command
// again is a new run: its leader says what etcd holds and does not take it over; its workers
// start at restart 0 with the whole budget, and its end removes the keys.
TEST(EtcdV3, AKilledJobsStateIsNotTakenOverByTheNextJobOfItsId) {
  std::unique_ptr<EtcdServer> etcd = EtcdServer::Start();
  ASSERT_NE(etcd, nullptr);
  TempDir first, second;
  WriteFile(first / "pause.1", "");  // restart 1's rank 1 waits
  std::vector<std::unique_ptr<ChildProcess>> killed;
  for (int node = 1; node <= 2; ++node) {
    killed.push_back(ChildProcess::Start(
        EtcdAgent(*etcd, "job", node, "2", {"crash-until", "2", first.path()}), kInfo));
  }
  ASSERT_TRUE(WaitUntil([&] { return FileExists(first / "at.1"); }, absl::Seconds(30)));
  // The leader wrote the failure down (the failing node's record) before it is killed.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return etcd->Ctl({"get", "--print-value-only", "/ddprun/job/state"}).out.find("127.0.0.") !=
               std::string::npos;
      },
      absl::Seconds(10)));
  for (auto& agent : killed) ASSERT_EQ(::kill(agent->pid(), SIGKILL), 0);
  for (auto& agent : killed) agent->Wait(absl::Seconds(10));
  ASSERT_THAT(etcd->Keys("/ddprun/job/"), HasSubstr("/ddprun/job/state"));

  auto a = ChildProcess::Start(EtcdAgent(*etcd, "job", 1, "2", {"env", second.path()}), kInfo);
  auto b = ChildProcess::Start(EtcdAgent(*etcd, "job", 2, "2", {"env", second.path()}), kInfo);
  ProcessResult ra = a->Wait(absl::Seconds(60)), rb = b->Wait(absl::Seconds(60));
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  for (int rank = 0; rank < 4; ++rank) {
    const auto file = second / absl::StrCat("env.", rank, ".0");
    ASSERT_TRUE(FileExists(file)) << "rank " << rank << " ran at restart 0: " << ra.err << rb.err;
    EXPECT_EQ(ParseEnvFile(file)["TORCHELASTIC_RESTART_COUNT"], "0");
  }
  EXPECT_THAT(ra.err + rb.err,
              HasSubstr("run 'job': etcd holds another run's state at /ddprun/job/state"));
  EXPECT_THAT(ra.err + rb.err, Not(HasSubstr("with what the last leader remembered")));
  EXPECT_EQ(etcd->Keys("/ddprun/"), "");
}

// etcd over TLS that asks for client certificates. An etcd whose certificate the given CA did
// not sign is refused at once, with the keys to check. A client certificate etcd does not
// trust: etcd closes the connection after the handshake, which gRPC tells apart from nothing
// else; the agent says what to check, and exits 75 at join_timeout. The right files let the
// node in.
TEST(EtcdV3, ACertificateEitherSideDoesNotTrustIsRefusedWithTheSettingsToCheck) {
  TempDir certs;
  ASSERT_TRUE(MakeTestCertificates(certs).ok());
  std::unique_ptr<EtcdServer> etcd = EtcdServer::Start(&certs);
  ASSERT_NE(etcd, nullptr);
  TempDir dir;
  WriteFile(dir / "release", "");
  const auto run = [&](const std::string& ca, const std::string& cert) {
    return RunProcess(
        EtcdAgent(*etcd, "job", 1, "1:2", {"round-env", dir.path()},
                  absl::StrCat("last_call_timeout=0.2,join_timeout=2,keep_alive_interval=0.5,"
                               "protocol=https,cacert=",
                               certs / (ca + ".pem"), ",cert=", certs / (cert + ".pem"),
                               ",key=", certs / (cert + ".key"))),
        {}, absl::Seconds(60));
  };
  ProcessResult untrusted_etcd = run("rogue-ca", "node");
  EXPECT_EQ(untrusted_etcd.exit_code, 75) << untrusted_etcd.err;
  EXPECT_THAT(untrusted_etcd.err, HasSubstr("or protocol, cacert, cert and key (TLS)"));
  ProcessResult untrusted_node = run("ca", "rogue");
  EXPECT_EQ(untrusted_node.exit_code, 75) << untrusted_node.err;
  EXPECT_THAT(untrusted_node.err,
              HasSubstr("a client certificate it does not trust: check --rdzv-conf cert and key"));
  ProcessResult let_in = run("ca", "node");
  EXPECT_EQ(let_in.exit_code, 0) << let_in.err;
  EXPECT_TRUE(FileExists(dir / "env.1.r0"));
}

}  // namespace
}  // namespace ddprun::testing
