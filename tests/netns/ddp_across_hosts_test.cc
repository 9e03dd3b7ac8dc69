// Real PyTorch DDP (Debian's torch 1.13, gloo) across hosts, with the command lines torchrun
// tutorials teach and nothing more: no --local-addr, and each host's name resolves only on
// that host, to 127.0.1.1 (NetnsCluster), as on most clusters. Workers must meet at an
// address every host reaches: the store their rank-0 agent serves (docs/environment.md).
// Labels netns (root: network namespaces) and compat (PyTorch).

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/small_file.h"
#include "tests/compat/compat_paths.h"
#include "tests/compat/ddp_results.h"
#include "tests/compat/hang_job.h"
#include "tests/netns/netns_cluster.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"
#include "tests/support/master_outage.h"

namespace ddprun::testing {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

const std::string kTrain = kSourceDir + "/tests/compat/ddp_train.py";
const std::string kMaster = DDPRUN_MASTER_BIN;
constexpr int kPort = 29500;

class DdpAcrossHosts : public ::testing::Test {
 protected:
  void MakeHosts(int hosts, NetnsCluster::Names names = NetnsCluster::Names::kOwnOnly) {
    auto cluster = NetnsCluster::Create(hosts, names);
    if (!cluster.ok()) GTEST_SKIP() << "no network namespaces here: " << cluster.status().message();
    cluster_ = std::move(*cluster);
  }

  // ddprun on `host` with `options`, training into `out` (ddp_train.py `script_args`).
  std::unique_ptr<ChildProcess> Ddprun(int host, const std::vector<std::string>& options,
                                       const TempDir& out,
                                       const std::vector<std::string>& script_args = {},
                                       const std::string& python = kPython) {
    std::vector<std::string> argv = {kDdprun};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.push_back(kTrain);
    argv.push_back(out.path());
    argv.insert(argv.end(), script_args.begin(), script_args.end());
    return cluster_->Start(host, argv, {{"PYTHON_EXEC", python}, {"LOGLEVEL", "INFO"}});
  }

  // torchrun's c10d form, the same on every host.
  static std::vector<std::string> C10d(const std::string& nnodes, const std::string& endpoint_host,
                                       std::vector<std::string> extra = {}) {
    std::vector<std::string> options = {
        "--nnodes=" + nnodes, "--nproc_per_node=2", "--rdzv_backend=c10d",
        absl::StrCat("--rdzv_endpoint=", endpoint_host, ":", kPort), "--rdzv_id=my_job"};
    options.insert(options.end(), extra.begin(), extra.end());
    return options;
  }

  // `out`/<prefix><rank> exists for every one of `ranks` ranks.
  static bool EveryRankWrote(const TempDir& out, const std::string& prefix, int ranks) {
    for (int rank = 0; rank < ranks; ++rank) {
      if (!FileExists(out / absl::StrCat(prefix, rank))) return false;
    }
    return true;
  }

  static void ExpectExit0(ChildProcess& agent, absl::Duration timeout = absl::Seconds(180)) {
    ProcessResult r = agent.Wait(timeout);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  }

  void ExpectHostsEmpty(int hosts) {
    for (int host = 1; host <= hosts; ++host) {
      EXPECT_TRUE(WaitUntil([&] { return cluster_->ProcessesOn(host).empty(); }, absl::Seconds(10)))
          << "processes left on host " << host;
    }
  }

  // Hosts 1 and 2 run `options(host)` to the end: all 4 ranks trained and were told to meet
  // at `addr`:kPort, and nothing is left on either host.
  void ExpectTwoHostsTrainMeetingAt(const std::function<std::vector<std::string>(int)>& options,
                                    const std::string& addr) {
    TempDir out;
    auto a = Ddprun(1, options(1), out);
    auto b = Ddprun(2, options(2), out);
    ExpectExit0(*a);
    ExpectExit0(*b);
    ExpectTrained(out, 4);
    ExpectMeetingAt(out, 4, addr, kPort);
    ExpectHostsEmpty(2);
  }

  // A crashed job on hosts 1 and 2 with `python`, without and with --preload=torch.
  void TrainWithAndWithoutThePool(const std::string& python);
  // A DDP job on hosts 2 and 3 whose ddprun-master on host 1 `disturb` takes away and brings
  // back (the master it serves with afterwards, if another), against an undisturbed run.
  void TrainThroughAMasterOutage(const std::function<void(ChildProcess*&)>& disturb) {
    TrainThroughAnOutage(
        C10d("2", NetnsCluster::Address(1),
             {"--rdzv_conf=keep_alive_interval=1,heartbeat_timeout=1,keep_alive_max_attempt=10"}),
        [&] {
          return cluster_->Start(1, {kMaster, absl::StrCat("--port=", kPort)});
        },
        disturb);
  }
  // The same with `options`, and what host 1 serves the job (`serve`: a ddprun-master, etcd).
  void TrainThroughAnOutage(const std::vector<std::string>& options,
                            const std::function<std::unique_ptr<ChildProcess>()>& serve,
                            const std::function<void(ChildProcess*&)>& disturb);
  // One etcd member on host 1, with its data in `data`.
  std::unique_ptr<ChildProcess> Etcd(const TempDir& data) {
    const std::string client = absl::StrCat("http://", NetnsCluster::Address(1), ":2379");
    const std::string peer = absl::StrCat("http://", NetnsCluster::Address(1), ":2380");
    auto etcd =
        cluster_->Start(1, {"/usr/bin/etcd", "--name=e1", "--data-dir=" + (data / "etcd"),
                            "--listen-client-urls=" + client, "--advertise-client-urls=" + client,
                            "--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
                            "--initial-cluster=e1=" + peer, "--log-level=warn", "--logger=zap"});
    return etcd;
  }
  // torchrun's etcd form (`--rdzv_backend=etcd`, which ddprun runs on the v3 API), etcd on
  // host 1.
  static std::vector<std::string> EtcdForm(const std::string& nnodes,
                                           std::vector<std::string> extra = {}) {
    std::vector<std::string> options = {
        "--nnodes=" + nnodes, "--nproc_per_node=2", "--rdzv_backend=etcd",
        absl::StrCat("--rdzv_endpoint=", NetnsCluster::Address(1), ":2379"), "--rdzv_id=my_job"};
    options.insert(options.end(), extra.begin(), extra.end());
    return options;
  }

  std::unique_ptr<NetnsCluster> cluster_;
};

// torchrun's static form: the workers meet at --master_addr:--master_port, where node 0's
// agent serves their store beside the rendezvous master.
TEST_F(DdpAcrossHosts, TheStaticFormTrains) {
  MakeHosts(2);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  ExpectTwoHostsTrainMeetingAt(
      [](int host) {
        return std::vector<std::string>{
            "--nnodes=2", absl::StrCat("--node_rank=", host - 1), "--nproc_per_node=2",
            "--master_addr=" + NetnsCluster::Address(1), absl::StrCat("--master_port=", kPort)};
      },
      NetnsCluster::Address(1));
}

// torchrun's c10d form: node1 hosts the master and gets group rank 0 (node1 < node2), so its
// workers' store is on the endpoint's port too: one port for the whole job.
TEST_F(DdpAcrossHosts, TheC10dFormTrains) {
  MakeHosts(2);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  ExpectTwoHostsTrainMeetingAt([](int) { return C10d("2", NetnsCluster::Address(1)); },
                               NetnsCluster::Address(1));
}

// Names that resolve everywhere, each host's own to 127.0.1.1 there (Debian with DNS), and
// the endpoint given by name: workers get MASTER_ADDR=node1, which node1 itself resolves to
// loopback; gloo there must still listen where node2 reaches it (GLOO_SOCKET_IFNAME: the
// interface node2's connection arrived at).
TEST_F(DdpAcrossHosts, TheC10dFormTrainsWithAnEndpointNamedAsTheHostIsNamed) {
  MakeHosts(2, NetnsCluster::Names::kEverywhere);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  ExpectTwoHostsTrainMeetingAt([](int) { return C10d("2", NetnsCluster::HostName(1)); },
                               NetnsCluster::HostName(1));
}

// --nnodes=1:2: host 1 runs alone, host 2 joins; both restart as one world of 4 and train.
TEST_F(DdpAcrossHosts, ASecondHostJoiningLaterGrowsTheJob) {
  MakeHosts(2);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  TempDir out;
  const std::vector<std::string> elastic =
      C10d("1:2", NetnsCluster::Address(1), {"--rdzv_conf=last_call_timeout=1"});
  auto a = Ddprun(1, elastic, out, {"--world", "4"});
  ASSERT_TRUE(
      WaitUntil([&] { return FileExists(out / "ready.2.0") && FileExists(out / "ready.2.1"); },
                absl::Seconds(120)))
      << a->ErrSoFar();
  auto b = Ddprun(2, elastic, out, {"--world", "4"});
  ExpectExit0(*a);
  ExpectExit0(*b);
  ExpectTrained(out, 4);
  EXPECT_EQ(Launch(out, 3)["TORCHELASTIC_RESTART_COUNT"], "0") << "a join spends no restart";
  ExpectHostsEmpty(2);
}

// A worker on host 2 crashes mid-training: every worker on both hosts restarts, and the job
// ends with the parameters of a run that never crashed.
TEST_F(DdpAcrossHosts, ACrashOnTheSecondHostRestartsBothAndTrainsTheSame) {
  MakeHosts(2);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  TempDir clean, crashed;
  const std::vector<std::string> options =
      C10d("2", NetnsCluster::Address(1), {"--max_restarts=1"});
  auto a = Ddprun(1, options, clean);
  auto b = Ddprun(2, options, clean);
  ExpectExit0(*a);
  ExpectExit0(*b);
  const std::string uncrashed = ExpectTrained(clean, 4);
  a = Ddprun(1, options, crashed, {"--crash", "2:5"});
  b = Ddprun(2, options, crashed, {"--crash", "2:5"});
  ExpectExit0(*a);
  ProcessResult rb = b->Wait(absl::Seconds(180));
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_THAT(rb.out + rb.err, HasSubstr("rank 2: crashing at step 5"));
  EXPECT_EQ(ExpectTrained(crashed, 4), uncrashed);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(Launch(crashed, rank)["TORCHELASTIC_RESTART_COUNT"], "1") << rank;
  }
  ExpectHostsEmpty(2);
}

// The same crash with --preload=torch on both hosts: every attempt's workers are forked from
// each host's warm pool, and the job ends bit for bit as without it (parameters and losses
// of every rank). Host 1 serves the workers' store: its restart's split reaches the store.
// With Debian's torch 1.13, and with the torch 2.x root when there is one.
TEST_F(DdpAcrossHosts, WithTheWarmPoolACrashTrainsBitForBitAsWithoutIt) {
  MakeHosts(2);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  std::vector<std::string> pythons = {kPython};
  if (WhyNoTorch2().empty()) pythons.push_back(kTorch2Python);
  for (const std::string& python : pythons) {
    SCOPED_TRACE(python);
    TrainWithAndWithoutThePool(python);
  }
  ExpectHostsEmpty(2);
}

void DdpAcrossHosts::TrainWithAndWithoutThePool(const std::string& python) {
  TempDir started, forked;
  for (TempDir* out : {&started, &forked}) {
    std::vector<std::string> options = C10d("2", NetnsCluster::Address(1), {"--max_restarts=1"});
    if (out == &forked) options.push_back("--preload=torch");
    auto a = Ddprun(1, options, *out, {"--crash", "2:5"}, python);
    auto b = Ddprun(2, options, *out, {"--crash", "2:5"}, python);
    ProcessResult ra = a->Wait(absl::Seconds(180));
    ProcessResult rb = b->Wait(absl::Seconds(180));
    ASSERT_EQ(ra.exit_code, 0) << ra.err;
    ASSERT_EQ(rb.exit_code, 0) << rb.err;
    if (out == &forked) {
      for (const ProcessResult* r : {&ra, &rb}) {
        EXPECT_THAT(r->err, HasSubstr("workers are forked from it")) << r->err;
        EXPECT_THAT(r->err, ::testing::Not(HasSubstr("--preload: workers start the usual way")));
      }
    }
    EXPECT_THAT(ra.err, ::testing::ContainsRegex("restart 1 \\(round 1\\) took [0-9]+ ms on this "
                                                 "node: .*every rank connected to the store"))
        << ra.err;
  }
  EXPECT_EQ(ExpectTrained(forked, 4), ExpectTrained(started, 4));
  for (int rank = 0; rank < 4; ++rank) {
    const std::string file = absl::StrCat("rank", rank, ".txt");
    EXPECT_EQ(ReadFile(forked / file), ReadFile(started / file)) << file;
  }
}

// The endpoint is a third host running ddprun-master: group rank 0's node hosts nothing, and
// its workers' store is reached at the address the master saw its agent connect from.
TEST_F(DdpAcrossHosts, RankZeroOnAHostThatIsNotTheEndpoint) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  TempDir out;
  auto master = cluster_->Start(1, {kMaster, absl::StrCat("--port=", kPort)});
  auto a = Ddprun(2, C10d("2", NetnsCluster::Address(1)), out);
  auto b = Ddprun(3, C10d("2", NetnsCluster::Address(1)), out);
  ExpectExit0(*a);
  ExpectExit0(*b);
  ExpectTrained(out, 4);
  for (int rank = 0; rank < 4; ++rank) {
    auto launch = Launch(out, rank);
    EXPECT_EQ(launch["MASTER_ADDR"], NetnsCluster::Address(2)) << rank;  // node2: group rank 0
    EXPECT_NE(launch["MASTER_PORT"], std::to_string(kPort)) << "its own store's port";
  }
  ::kill(master->pid(), SIGTERM);
  EXPECT_EQ(master->Wait(absl::Seconds(10)).exit_code, 0);
  ExpectHostsEmpty(3);
}

// The master is not in the data path. ddprun-master on host 1; a real DDP job on hosts 2
// and 3 is held mid-training (ddp_train.py --hold) while `disturb` takes the master away and
// brings it back; then it trains on. No worker restarted (the same pids, restart count 0),
// and every rank ends with the parameters and losses of an undisturbed run.
// Agents notice a silent master within 2 s (a cut link is silent); the window is wide.
void DdpAcrossHosts::TrainThroughAnOutage(
    const std::vector<std::string>& options,
    const std::function<std::unique_ptr<ChildProcess>()>& serve,
    const std::function<void(ChildProcess*&)>& disturb) {
  TempDir undisturbed, disturbed;
  WriteFile(undisturbed / "go", "");
  std::vector<std::string> held_pids;  // each rank's worker before the outage
  std::string agents_said;
  for (TempDir* out : {&undisturbed, &disturbed}) {
    auto master = serve();
    ChildProcess* serving = master.get();
    auto a = Ddprun(2, options, *out, {"--hold", "12"});
    auto b = Ddprun(3, options, *out, {"--hold", "12"});
    std::unique_ptr<ChildProcess> second;
    if (out == &disturbed) {
      ASSERT_TRUE(WaitUntil([&] { return EveryRankWrote(*out, "held.", 4); }, absl::Seconds(120)))
          << a->ErrSoFar() << b->ErrSoFar();
      for (int rank = 0; rank < 4; ++rank) {
        held_pids.push_back(ReadFile(*out / absl::StrCat("held.", rank)));
      }
      disturb(serving);
      if (serving != master.get()) second.reset(serving);
      ASSERT_TRUE(BothHadTheirPlacesBack(*a, *b, 0, absl::Seconds(30)));
      WriteFile(*out / "go", "");
    }
    ProcessResult ra = a->Wait(absl::Seconds(180));
    ProcessResult rb = b->Wait(absl::Seconds(180));
    EXPECT_EQ(ra.exit_code, 0) << ra.err;
    EXPECT_EQ(rb.exit_code, 0) << rb.err;
    agents_said = ra.err + rb.err;
    ::kill(serving->pid(), SIGTERM);
    // etcd ends of the SIGTERM itself once it has shut down; ddprun-master exits 0.
    EXPECT_THAT(serving->Wait(absl::Seconds(10)).exit_code, AnyOf(0, 128 + SIGTERM));
  }
  EXPECT_EQ(ExpectTrained(disturbed, 4), ExpectTrained(undisturbed, 4));
  for (int rank = 0; rank < 4; ++rank) {
    const std::string file = absl::StrCat("rank", rank, ".txt");
    EXPECT_EQ(ReadFile(disturbed / file), ReadFile(undisturbed / file)) << file;  // the losses
    auto launch = Launch(disturbed, rank);
    EXPECT_EQ(launch["TORCHELASTIC_RESTART_COUNT"], "0") << rank;
    // The worker held before the outage is the one that finished (a restarted one would
    // have written its own launch record).
    ASSERT_EQ(held_pids.size(), 4u);
    EXPECT_EQ(absl::StrCat(launch["PID"], "\n"), held_pids[rank]) << rank;
  }
  EXPECT_THAT(agents_said, ::testing::Not(HasSubstr("restarting all workers")));
  ExpectHostsEmpty(3);
}

TEST_F(DdpAcrossHosts, TheMasterKilledAndStartedAgain3sLaterStopsNoWorker) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  TrainThroughAMasterOutage([&](ChildProcess*& master) {
    ASSERT_EQ(::kill(master->pid(), SIGKILL), 0);
    master->Wait(absl::Seconds(10));
    absl::SleepFor(absl::Seconds(3));
    master = cluster_->Start(1, {kMaster, absl::StrCat("--port=", kPort)}).release();
  });
}

TEST_F(DdpAcrossHosts, TheMastersHostCutOffFor5sStopsNoWorker) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  TrainThroughAMasterOutage([&](ChildProcess*&) {
    ASSERT_TRUE(cluster_->SetLinkUp(1, false).ok());
    absl::SleepFor(absl::Seconds(5));
    ASSERT_TRUE(cluster_->SetLinkUp(1, true).ok());
  });
}

#ifdef DDPRUN_ETCD  // built with the etcd-v3 backend
// torchrun's etcd command line (ddprun runs it on etcd's v3 API; etcd on host 1): a worker
// on host 3 crashes mid-training, every worker restarts, and the job ends with the
// parameters of a run that never crashed.
TEST_F(DdpAcrossHosts, TheEtcdFormTrainsAndACrashRestartsBothToTheSameParameters) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  TempDir data, clean, crashed;
  auto etcd = Etcd(data);
  const std::vector<std::string> options = EtcdForm("2", {"--max_restarts=1"});
  auto a = Ddprun(2, options, clean);
  auto b = Ddprun(3, options, clean);
  ExpectExit0(*a);
  ExpectExit0(*b);
  const std::string uncrashed = ExpectTrained(clean, 4);
  a = Ddprun(2, options, crashed, {"--crash", "2:5"});
  b = Ddprun(3, options, crashed, {"--crash", "2:5"});
  ExpectExit0(*a);
  ProcessResult rb = b->Wait(absl::Seconds(180));
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_THAT(rb.out + rb.err, HasSubstr("rank 2: crashing at step 5"));
  EXPECT_THAT(rb.err, HasSubstr("--rdzv-backend=etcd uses etcd's v3 API"));
  EXPECT_EQ(ExpectTrained(crashed, 4), uncrashed);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(Launch(crashed, rank)["TORCHELASTIC_RESTART_COUNT"], "1") << rank;
  }
  ::kill(etcd->pid(), SIGTERM);
  etcd->Wait(absl::Seconds(10));
  ExpectHostsEmpty(3);
}

// etcd (one member, on host 1) frozen for 4 s mid-training: the run's leader cannot renew
// its lease and steps down, its master stops; the workers go on, and once etcd answers the
// nodes elect a leader and have their places back. No worker restarted (the same pids,
// restart count 0), and every rank ends with the parameters and losses of an undisturbed
// run.
TEST_F(DdpAcrossHosts, EtcdFrozenMidTrainingStopsNoWorker) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  TempDir data;
  TrainThroughAnOutage(
      EtcdForm("2", {"--rdzv_conf=keep_alive_interval=1,heartbeat_timeout=1,"
                     "keep_alive_max_attempt=10,lease_ttl=2"}),
      [&] { return Etcd(data); },  // the runs after each other: the first removed its keys
      [&](ChildProcess*& etcd) {
        ASSERT_EQ(::kill(etcd->pid(), SIGSTOP), 0);
        absl::SleepFor(absl::Seconds(4));
        ASSERT_EQ(::kill(etcd->pid(), SIGCONT), 0);
      });
}
#endif  // DDPRUN_ETCD

// Workers that cannot meet (group rank 0's node gave --local-addr of another host, where the
// port is closed): they retry in init_process_group until its 30 min timeout; stopped, each
// node's summary names the MASTER_ADDR and MASTER_PORT they were given, the thing to check.
TEST_F(DdpAcrossHosts, WorkersThatCannotMeetAreStoppedWithTheirMeetingPointNamed) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  TempDir out;
  auto master = cluster_->Start(1, {kMaster, absl::StrCat("--port=", kPort)});
  const std::string nobody = NetnsCluster::Address(1);  // no store there
  auto a = Ddprun(2, C10d("2", NetnsCluster::Address(1), {"--local_addr=" + nobody}), out);
  auto b = Ddprun(3, C10d("2", NetnsCluster::Address(1)), out);
  ASSERT_TRUE(WaitUntil([&] { return EveryRankWrote(out, "meeting.", 4); }, absl::Seconds(60)))
      << a->ErrSoFar() << b->ErrSoFar();
  // They wait for each other; give them a moment to be well into init_process_group's
  // connection retries (nothing to wait on: they only retry).
  EXPECT_FALSE(WaitUntil([&] { return FileExists(out / "launch0.txt"); }, absl::Seconds(3)));
  ::kill(a->pid(), SIGTERM);
  ::kill(b->pid(), SIGTERM);
  for (auto* agent : {&a, &b}) {
    ProcessResult r = (*agent)->Wait(absl::Seconds(60));
    EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
    EXPECT_THAT(r.err, HasSubstr("ddp_train.py STOPPED by SIGTERM"));
    EXPECT_THAT(r.err, HasSubstr("Workers meet at: MASTER_ADDR=" + nobody + " MASTER_PORT="));
  }
  EXPECT_FALSE(FileExists(out / "rank0.txt")) << "they met after all";
  ::kill(master->pid(), SIGTERM);
  master->Wait(absl::Seconds(10));
  ExpectHostsEmpty(3);
}

// A rank that hangs, as users meet it: torchrun's command line, no --local-addr, host names
// that resolve only on their own host. Every host's log dir gets one report of all four
// ranks: the three in all_reduce waiting for the hung one, which is the outlier.
TEST_F(DdpAcrossHosts, AHungRankGivesEveryHostOneReportOfAllRanksGrouped) {
  MakeHosts(2);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  const std::string& job = kHangJob;
  TempDir logs1, logs2;
  auto agent = [&](int host, const TempDir& logs) {
    std::vector<std::string> argv = {kDdprun};
    for (const std::string& o :
         C10d("2", NetnsCluster::Address(1),
              {"--worker-heartbeat-timeout=3", "--log-dir=" + logs.path()})) {
      argv.push_back(o);
    }
    argv.insert(argv.end(), {job, "collective", "3"});
    return cluster_->Start(host, argv, {{"PYTHON_EXEC", kPython}});
  };
  auto a = agent(1, logs1);
  auto b = agent(2, logs2);
  ProcessResult ra = a->Wait(absl::Seconds(120));
  ProcessResult rb = b->Wait(absl::Seconds(120));
  EXPECT_EQ(ra.exit_code, 124) << ra.err;  // the root cause: rank 3, taken for hung
  EXPECT_EQ(rb.exit_code, 124) << rb.err;
  const std::string node2 = NetnsCluster::HostName(2);
  for (const TempDir* logs : {&logs1, &logs2}) {
    absl::StatusOr<std::string> report =
        ReadSmallFile(logs->path() + "/my_job/attempt_0/hang_report.txt");
    ASSERT_TRUE(report.ok()) << report.status() << ra.err << rb.err;
    SCOPED_TRACE(*report);
    EXPECT_THAT(*report, HasSubstr("hang report (round 0): rank 3 sent no heartbeat for"));
    EXPECT_THAT(*report, HasSubstr(": in all_reduce ("));
    EXPECT_THAT(*report, HasSubstr("(the majority: taken as healthy)"));
    EXPECT_THAT(*report,
                HasSubstr("rank 3 on " + node2 + ": in " + HungRankWhere() + "  (outlier)"));
    EXPECT_THAT(*report, HasSubstr("suspect node: " + node2));
  }
  EXPECT_THAT(rb.err, HasSubstr("Where every rank was: " + logs2.path()));
  ExpectHostsEmpty(2);
}

// The review's attack: the workers' TCPStore (no token in torch's protocol) let an outsider
// list keys, read rank 0's address and release the barrier. Now group rank 0's agent serves
// only the round's hosts: an outsider on host 3 is refused, and the job's own workers on
// hosts 1 and 2 met through the same store and run on.
TEST_F(DdpAcrossHosts, AnOutsiderCannotUseTheWorkersStoreWhileTheJobsHostsDo) {
  MakeHosts(3);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  TempDir out;
  // --world 8: each rank does one all_reduce in a world of 4 and waits to be stopped.
  auto a = Ddprun(1, C10d("2", NetnsCluster::Address(1)), out, {"--world", "8"});
  auto b = Ddprun(2, C10d("2", NetnsCluster::Address(1)), out, {"--world", "8"});
  ASSERT_TRUE(WaitUntil([&] { return EveryRankWrote(out, "ready.4.", 4); }, absl::Seconds(120)))
      << a->ErrSoFar() << b->ErrSoFar();
  auto outsider = cluster_->Start(3, {kPython, kSourceDir + "/tests/compat/tcpstore_client.py",
                                      "intrude", NetnsCluster::Address(1), absl::StrCat(kPort)});
  ProcessResult intrusion = outsider->Wait(absl::Seconds(60));
  EXPECT_EQ(intrusion.exit_code, 0) << intrusion.out << intrusion.err;
  EXPECT_THAT(intrusion.out, HasSubstr("refused: "));
  EXPECT_THAT(a->ErrSoFar(), HasSubstr(absl::StrCat(
                                 NetnsCluster::Address(3),
                                 " is not an address of a node in this round, nor of this host")));
  for (auto* agent : {a.get(), b.get()}) ::kill(agent->pid(), SIGTERM);
  for (auto* agent : {a.get(), b.get()}) {
    ProcessResult r = agent->Wait(absl::Seconds(60));
    EXPECT_EQ(r.exit_code, 143) << r.err;
    EXPECT_THAT(r.err, ::testing::Not(HasSubstr("failed (exitcode"))) << "a worker failed first";
  }
  ExpectHostsEmpty(3);
}

// What a Kubeflow PyTorchJob gives each pod (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK,
// PET_MASTER_ADDR, PET_MASTER_PORT) and nothing else: the static form. The master's name, a
// headless service's, resolves nowhere until its pod is ready: each agent waits for it,
// saying so, then the job trains meeting at that name.
TEST_F(DdpAcrossHosts, APyTorchJobsVariablesAloneTrainOnceTheMastersNameResolves) {
  MakeHosts(2);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  const std::string name = "pytorchjob-master-0";
  TempDir out;
  auto pod = [&](int host) {
    return cluster_->Start(host, {kDdprun, kTrain, out.path()},
                           {{"PET_NNODES", "2"},
                            {"PET_NPROC_PER_NODE", "2"},
                            {"PET_NODE_RANK", absl::StrCat(host - 1)},
                            {"PET_MASTER_ADDR", name},
                            {"PET_MASTER_PORT", absl::StrCat(kPort)},
                            {"PYTHON_EXEC", kPython},
                            {"LOGLEVEL", "INFO"}});
  };
  auto a = pod(1);
  auto b = pod(2);
  const std::string waiting = "--master-addr '" + name + "' does not resolve on this node";
  for (ChildProcess* agent : {a.get(), b.get()}) {
    EXPECT_TRUE(WaitUntil([&] { return agent->ErrSoFar().find(waiting) != std::string::npos; },
                          absl::Seconds(30)))
        << agent->ErrSoFar();
  }
  // The master's pod is ready: its name resolves on both hosts, to host 1.
  for (int host : {1, 2}) {
    ASSERT_TRUE(cluster_->AddHostsLine(host, NetnsCluster::Address(1) + " " + name).ok());
  }
  ProcessResult first = a->Wait(absl::Seconds(180));
  ProcessResult second = b->Wait(absl::Seconds(180));
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(second.exit_code, 0) << second.err;
  EXPECT_THAT(second.err, HasSubstr("waiting up to 600s (join_timeout) for it to resolve"));
  EXPECT_THAT(second.err, HasSubstr("--master-addr '" + name + "' resolves now, after"));
  ExpectTrained(out, 4);
  ExpectMeetingAt(out, 4, name, kPort);
  ExpectHostsEmpty(2);
}

// The same variables with a name that never resolves: the agent says so at the bound
// (join_timeout, 3 s here), names the host and exits 75; nothing is started.
TEST_F(DdpAcrossHosts, AMasterNameThatNeverResolvesEndsTheAgentAtJoinTimeoutNamingIt) {
  MakeHosts(1);
  if (IsSkipped()) return;  // GTEST_SKIP in a helper ends only the helper
  TempDir out;
  const absl::Time start = absl::Now();
  auto agent = cluster_->Start(1, {kDdprun, kTrain, out.path()},
                               {{"PET_NNODES", "2"},
                                {"PET_NPROC_PER_NODE", "2"},
                                {"PET_NODE_RANK", "1"},
                                {"PET_MASTER_ADDR", "no-such-service"},
                                {"PET_MASTER_PORT", absl::StrCat(kPort)},
                                {"PET_RDZV_CONF", "join_timeout=3"},
                                {"PYTHON_EXEC", kPython}});
  ProcessResult r = agent->Wait(absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_GE(absl::Now() - start, absl::Seconds(3));
  EXPECT_THAT(r.err, HasSubstr("--master-addr 'no-such-service' does not resolve on this node"));
  EXPECT_THAT(r.err, HasSubstr("it did not resolve within 3s (join_timeout; --rdzv-conf "
                               "join_timeout=SECONDS waits longer)"));
  EXPECT_FALSE(EveryRankWrote(out, "meeting.", 1));
  ExpectHostsEmpty(1);
}

}  // namespace
}  // namespace ddprun::testing
