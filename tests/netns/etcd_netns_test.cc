// The etcd-v3 backend across hosts that behave like separate machines: a three-member etcd
// cluster, one member on each of hosts 1-3 (Debian's etcd-server), and one agent on each of
// them, started as users start them (no --local-addr; each host's name resolves only there,
// to loopback). Each scenario asserts the outcome and prints what it measured ("[ netns ]"
// lines, which scripts/reliability_report.py collects), and checks that nothing of the
// test is left on any host.

#include <signal.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "tests/netns/netns_cluster.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"
#include "tests/support/master_outage.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kEtcd[] = "/usr/bin/etcd";
constexpr char kEtcdctl[] = "/usr/bin/etcdctl";
constexpr int kMembers = 3;

std::string ClientUrl(int host) {
  return absl::StrCat("http://", NetnsCluster::Address(host), ":2379");
}
std::string PeerUrl(int host) {
  return absl::StrCat("http://", NetnsCluster::Address(host), ":2380");
}

class EtcdNetnsTest : public ::testing::Test {
 protected:
  // Hosts 1..`hosts`, an etcd member on each of hosts 1-3.
  void MakeHostsAndEtcd(int hosts) {
    if (::access(kEtcd, X_OK) != 0) {
      FAIL() << kEtcd << " is missing: scripts/install-deps.sh installs etcd-server";
    }
    auto cluster = NetnsCluster::Create(hosts);
    if (!cluster.ok()) GTEST_SKIP() << "no network namespaces here: " << cluster.status().message();
    cluster_ = std::move(*cluster);
    std::vector<std::string> initial;
    for (int host = 1; host <= kMembers; ++host) {
      initial.push_back(absl::StrCat("e", host, "=", PeerUrl(host)));
    }
    for (int host = 1; host <= kMembers; ++host) StartMember(host, absl::StrJoin(initial, ","));
    ASSERT_TRUE(WaitUntil([&] { return EtcdHealthy(1); }, absl::Seconds(30)))
        << members_[0]->ErrSoFar();
  }

  void StartMember(int host, const std::string& initial_cluster) {
    members_.push_back(cluster_->Start(
        host,
        {kEtcd, absl::StrCat("--name=e", host),
         "--data-dir=" + (etcd_dir_ / absl::StrCat("e", host)),
         "--listen-client-urls=" + ClientUrl(host), "--advertise-client-urls=" + ClientUrl(host),
         "--listen-peer-urls=" + PeerUrl(host), "--initial-advertise-peer-urls=" + PeerUrl(host),
         "--initial-cluster=" + initial_cluster, "--initial-cluster-state=new", "--log-level=warn",
         "--logger=zap"}));
  }

  // etcdctl from `host` against every member.
  ProcessResult Etcdctl(int host, std::vector<std::string> args) {
    std::vector<std::string> argv = {kEtcdctl, "--endpoints=" + Members(), "--dial-timeout=2s",
                                     "--command-timeout=3s"};
    argv.insert(argv.end(), args.begin(), args.end());
    return cluster_->Start(host, argv, {{"ETCDCTL_API", "3"}})->Wait(absl::Seconds(20));
  }
  bool EtcdHealthy(int from_host) {
    return Etcdctl(from_host, {"endpoint", "health", "--cluster"}).exit_code == 0;
  }
  // The host of etcd's leader member, 0 when none answers.
  int EtcdLeader(int from_host) {
    for (int host = 1; host <= kMembers; ++host) {
      ProcessResult status = cluster_
                                 ->Start(from_host,
                                         {kEtcdctl, "--endpoints=" + ClientUrl(host), "endpoint",
                                          "status", "--write-out=fields"},
                                         {{"ETCDCTL_API", "3"}})
                                 ->Wait(absl::Seconds(20));
      if (status.out.find("\"Leader\" : ") == std::string::npos) continue;
      // "MemberID" and "Leader" match on the leader's own status.
      auto field = [&](const std::string& name) {
        const size_t at = status.out.find("\"" + name + "\" : ");
        return status.out.substr(at + name.size() + 5,
                                 status.out.find('\n', at) - at - name.size() - 5);
      };
      if (field("MemberID") == field("Leader")) return host;
    }
    return 0;
  }

  static std::string Members() {
    std::vector<std::string> members;
    for (int host = 1; host <= kMembers; ++host) {
      members.push_back(absl::StrCat(NetnsCluster::Address(host), ":2379"));
    }
    return absl::StrJoin(members, ",");
  }

  // An agent of an elastic job on `host`: two count-starts workers, the etcd-v3 backend on
  // the three members, and keep-alive settings that notice a silent master within 2 s; the
  // run's leader holds its place `lease_ttl` seconds after its last renewal.
  std::unique_ptr<ChildProcess> Agent(int host, const std::string& nnodes, int lease_ttl = 3) {
    std::vector<std::string> options = {
        "--nnodes=" + nnodes,
        "--nproc-per-node=2",
        "--rdzv-backend=etcd-v3",
        "--rdzv-endpoint=" + Members(),
        "--rdzv-id=job",
        "--max-restarts=3",
        absl::StrCat("--rdzv-conf=keep_alive_interval=1,heartbeat_timeout=1,last_call_timeout=0.5,"
                     "lease_ttl=",
                     lease_ttl)};
    return cluster_->Start(host, DdprunWithTestWorker(options, {"count-starts", dir_.path()}),
                           {{"LOGLEVEL", "INFO"}});
  }

  // Agents on hosts 1-3 of a 2:3 job, host 1's first (the node the job starts from), once
  // all six workers run. Returns the index of the agent that leads.
  int StartThreeAgents(int lease_ttl = 3) {
    for (int host = 1; host <= 3; ++host) agents_.push_back(Agent(host, "2:3", lease_ttl));
    EXPECT_TRUE(WaitUntil([&] { return AllLogged(dir_, 0, 6, "started", 1); }, absl::Seconds(30)))
        << agents_[0]->ErrSoFar();
    return Leader();
  }
  // The index of the agent whose node leads the run, as etcd's leader key names it (asked
  // from the first host that gets an answer); -1 when there is none.
  int Leader() {
    for (int from = 1; from <= kMembers; ++from) {
      ProcessResult read = Etcdctl(from, {"get", "/ddprun/job/leader", "--print-value-only"});
      if (read.exit_code != 0) continue;
      const std::string value(absl::StripAsciiWhitespace(read.out));
      for (size_t i = 0; i < agents_.size(); ++i) {
        const std::string host = absl::StrCat(NetnsCluster::Address(static_cast<int>(i) + 1), ":");
        if (agents_[i] != nullptr && absl::StartsWith(value, host)) return static_cast<int>(i);
      }
      return -1;
    }
    return -1;
  }

  void StopEverything(int hosts) {
    for (auto& agent : agents_) {
      if (agent != nullptr) agent->Wait(absl::Seconds(30));
    }
    for (auto& member : members_) {
      ::kill(member->pid(), SIGKILL);
      member->Wait(absl::Seconds(10));
    }
    for (int host = 1; host <= hosts; ++host) {
      EXPECT_TRUE(WaitUntil([&] { return cluster_->ProcessesOn(host).empty(); }, absl::Seconds(10)))
          << "processes left on host " << host;
    }
  }

  static void Measure(const std::string& scenario, const std::string& what, absl::Duration d) {
    std::printf("[ netns ] %s: %s %.1f ms\n", scenario.c_str(), what.c_str(),
                absl::ToDoubleMilliseconds(d));
  }

  TempDir dir_, etcd_dir_;
  std::unique_ptr<NetnsCluster> cluster_;
  std::vector<std::unique_ptr<ChildProcess>> members_;
  std::vector<std::unique_ptr<ChildProcess>> agents_;
};

// etcd's own leader member killed mid-job: etcd elects another among the two left, the
// nodes' leases carry over (a new etcd leader extends every lease by its TTL), and the job
// does not notice. The run's leader cannot renew its lease while etcd has no leader, and
// steps down if that lasts until its lease's end: lease_ttl=8 is the margin for etcd's own
// election on a loaded machine (it took 5.5 s beside two busy loops and the suite; 3 was
// passed there).
TEST_F(EtcdNetnsTest, EtcdsLeaderMemberKilledNothingHappensToTheJob) {
  constexpr int kLeaseTtl = 8;
  MakeHostsAndEtcd(3);
  if (IsSkipped() || HasFatalFailure()) return;
  const int ddprun_leader = StartThreeAgents(kLeaseTtl);
  ASSERT_GE(ddprun_leader, 0);
  const int etcd_leader = EtcdLeader(1);
  ASSERT_GT(etcd_leader, 0);
  const absl::Time killed = absl::Now();
  ASSERT_EQ(::kill(members_[etcd_leader - 1]->pid(), SIGKILL), 0);
  const int other = etcd_leader % kMembers + 1;
  ASSERT_TRUE(WaitUntil([&] { return EtcdLeader(other) != 0; }, absl::Seconds(20)));
  Measure("etcd leader member SIGKILL", "etcd has a new leader after", absl::Now() - killed);
  // What is under test is a window: a lease term passes after etcd's change, and a lease
  // that was not renewed through it would have made the run's leader step down within it
  // (its last renewal was before the kill). No event marks "nothing happened"; the window is
  // sized by the TTL.
  absl::SleepFor(absl::Seconds(kLeaseTtl));
  EXPECT_EQ(Leader(), ddprun_leader) << "the run's leader is the same";
  for (auto& agent : agents_) {
    EXPECT_THAT(agent->ErrSoFar(), Not(HasSubstr("lost the rendezvous master")));
  }
  WriteFile(dir_ / "release", "");
  for (auto& agent : agents_) {
    ProcessResult done = agent->Wait(absl::Seconds(30));
    EXPECT_EQ(done.exit_code, 0) << done.err;
  }
  ExpectEveryWorkerStartedOnce(dir_, 6);
  StopEverything(3);
}

// The run's leader's host cut off (its link down: its etcd member too): its lease runs out,
// the others elect a new leader, and re-form without it, budget untouched; the cut-off
// host stops its own workers.
TEST_F(EtcdNetnsTest, TheLeadersHostCutOffTheOthersReformWithoutItUnderANewLeader) {
  MakeHostsAndEtcd(3);
  if (IsSkipped() || HasFatalFailure()) return;
  const int leader = StartThreeAgents();
  ASSERT_GE(leader, 0);
  const int cut_host = leader + 1;
  std::vector<int> others;
  for (int host = 1; host <= 3; ++host) {
    if (host != cut_host) others.push_back(host);
  }
  const absl::Time cut = absl::Now();
  ASSERT_TRUE(cluster_->SetLinkUp(cut_host, false).ok());
  // The others' ranks, 2 of each host: which ranks they had depends on the order they
  // joined; every rank of the next round runs on them.
  ASSERT_TRUE(WaitUntil([&] { return AllLogged(dir_, 0, 4, "round=1", 1); }, absl::Seconds(40)))
      << agents_[others[0] - 1]->ErrSoFar();
  Measure("leader's host cut off", "the others running again (round 1) after", absl::Now() - cut);
  EXPECT_THAT(ReadFile(dir_ / "starts.0"), HasSubstr("round=1 restart=0"))
      << "a node lost spends no restart";
  int new_leader = Leader();
  EXPECT_GE(new_leader, 0);
  EXPECT_NE(new_leader, leader);
  EXPECT_THAT(agents_[leader]->ErrSoFar(), HasSubstr("this node no longer leads run 'job'"));
  // Cut off from the job too, the old leader's node stopped its workers: its own master
  // dropped the others before it stepped down, or, that master gone, it found the job out
  // of reach.
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string err = agents_[leader]->ErrSoFar();
        return err.find("this node is cut off from the job") != std::string::npos ||
               err.find("restarting all workers (membership change") != std::string::npos;
      },
      absl::Seconds(30)))
      << agents_[leader]->ErrSoFar();
  WriteFile(dir_ / "release", "");
  for (int host : others) {
    ProcessResult done = agents_[host - 1]->Wait(absl::Seconds(30));
    EXPECT_EQ(done.exit_code, 0) << done.err;
  }
  ASSERT_TRUE(cluster_->SetLinkUp(cut_host, true).ok());
  ::kill(agents_[leader]->pid(), SIGTERM);
  StopEverything(3);
}

// The node the job was started from (host 1: the first agent, the run's leader and group
// rank 0) lost for good: its link down and everything on it killed, etcd member included.
// --nnodes=2:3 with 3 hosts: the job goes on with 2, and finishes.
TEST_F(EtcdNetnsTest, TheNodeTheJobStartedFromLostForGoodTheJobGoesOnWithTwo) {
  MakeHostsAndEtcd(3);
  if (IsSkipped() || HasFatalFailure()) return;
  agents_.push_back(Agent(1, "2:3"));
  ASSERT_TRUE(WaitUntil([&] { return Leader() == 0; }, absl::Seconds(20)))
      << agents_[0]->ErrSoFar();
  agents_.push_back(Agent(2, "2:3"));
  agents_.push_back(Agent(3, "2:3"));
  ASSERT_TRUE(WaitUntil([&] { return AllLogged(dir_, 0, 6, "started", 1); }, absl::Seconds(30)));
  const absl::Time lost = absl::Now();
  ASSERT_TRUE(cluster_->SetLinkUp(1, false).ok());
  for (int pid : cluster_->ProcessesOn(1)) ::kill(pid, SIGKILL);
  ASSERT_TRUE(WaitUntil([&] { return AllLogged(dir_, 0, 4, "round=1", 1); }, absl::Seconds(40)))
      << agents_[1]->ErrSoFar();
  Measure("first node lost for good", "the other two running again (round 1) after",
          absl::Now() - lost);
  EXPECT_GE(Leader(), 1) << "a node left leads";
  EXPECT_THAT(ReadFile(dir_ / "starts.0"), HasSubstr("round=1 restart=0"));
  agents_[0]->Wait(absl::Seconds(10));
  agents_[0].reset();
  WriteFile(dir_ / "release", "");
  for (int i = 1; i <= 2; ++i) {
    ProcessResult done = agents_[i]->Wait(absl::Seconds(30));
    EXPECT_EQ(done.exit_code, 0) << done.err;
  }
  ASSERT_TRUE(cluster_->SetLinkUp(1, true).ok());
  StopEverything(3);
}

// etcd's quorum lost (two of its three members frozen) while the job trains: the workers go
// on, the agents say why; the leader steps down once it cannot renew its lease. Quorum back,
// the nodes elect a leader and have their places back in the same round: no worker stopped.
TEST_F(EtcdNetnsTest, EtcdQuorumLostTheWorkersGoOnAndTheRoundGoesOnWhenItIsBack) {
  MakeHostsAndEtcd(3);
  if (IsSkipped() || HasFatalFailure()) return;
  const int leader = StartThreeAgents();
  ASSERT_GE(leader, 0);
  const absl::Time lost = absl::Now();
  ASSERT_EQ(::kill(members_[1]->pid(), SIGSTOP), 0);
  ASSERT_EQ(::kill(members_[2]->pid(), SIGSTOP), 0);
  ASSERT_TRUE(WaitUntil(
      [&] {
        return agents_[leader]->ErrSoFar().find("this node no longer leads run 'job'") !=
               std::string::npos;
      },
      absl::Seconds(30)))
      << agents_[leader]->ErrSoFar();
  Measure("etcd quorum lost", "the run's leader stepped down after", absl::Now() - lost);
  for (auto& agent : agents_) {
    EXPECT_TRUE(WaitUntil([&] { return SaidWorkersGoOn(*agent, 0); }, absl::Seconds(10)))
        << agent->ErrSoFar();
  }
  // Membership waits while etcd has no quorum: for this window (2 s, past the 1 s keep-alive
  // and last call), no round re-forms. What is under test is that nothing happens in it.
  absl::SleepFor(absl::Seconds(2));
  EXPECT_FALSE(AllLogged(dir_, 0, 1, "round=1", 1));
  const absl::Time back = absl::Now();
  ASSERT_EQ(::kill(members_[1]->pid(), SIGCONT), 0);
  ASSERT_EQ(::kill(members_[2]->pid(), SIGCONT), 0);
  for (auto& agent : agents_) {
    EXPECT_TRUE(WaitUntil([&] { return SaidPlaceBack(*agent, 0); }, absl::Seconds(30)))
        << agent->ErrSoFar();
  }
  Measure("etcd quorum lost", "every agent back in its round after quorum returned",
          absl::Now() - back);
  WriteFile(dir_ / "release", "");
  for (auto& agent : agents_) {
    ProcessResult done = agent->Wait(absl::Seconds(30));
    EXPECT_EQ(done.exit_code, 0) << done.err;
  }
  ExpectEveryWorkerStartedOnce(dir_, 6);
  StopEverything(3);
}

}  // namespace
}  // namespace ddprun::testing
