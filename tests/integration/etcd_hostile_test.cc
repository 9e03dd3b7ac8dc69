// The etcd-v3 backend against whoever may write the run's keys in etcd (with etcd's default,
// no authentication: anyone who reaches it). The `leader` key names the address every agent,
// `ddprun status` and `ddprun stop` connect to: a forged one must get no token, a value that
// is no address must be refused and said printably, and a leader whose key someone deleted or
// overwrote must step down at once instead of leading beside another (docs/security.md#etcd-v3).
// Agents on loopback with --local-addr to tell them apart, as in etcd_test.cc.

#include <poll.h>
#include <sys/socket.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"
#include "tests/support/etcd_server.h"
#include "tests/support/silent_listener.h"
#include "tests/support/test_certificates.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kToken[] = "the-jobs-secret-token-5f2a9c";
constexpr char kLeaderKey[] = "/ddprun/job/leader";

std::vector<std::string> Agent(const EtcdServer& etcd, int node, const std::string& nnodes,
                               const std::string& dir, const std::string& conf = "") {
  std::vector<std::string> options = {
      "--nnodes=" + nnodes,     "--nproc-per-node=1",
      "--rdzv-backend=etcd-v3", "--rdzv-endpoint=" + etcd.endpoint(),
      "--rdzv-id=job",          absl::StrCat("--local-addr=127.0.0.", node)};
  if (!conf.empty()) options.push_back("--rdzv-conf=" + conf);
  return DdprunWithTestWorker(options, {"round-env", dir});
}

// A forged leader: it accepts connections and keeps every byte they send, answering nothing.
class RecordingLeader {
 public:
  RecordingLeader() {
    reader_ = std::thread([this] {
      std::vector<UniqueFd> peers;
      const absl::Time end = absl::Now() + absl::Seconds(60);
      while (!stop_ && absl::Now() < end) {
        std::vector<pollfd> fds = {{listener_.fd.get(), POLLIN, 0}};
        for (const UniqueFd& peer : peers) fds.push_back({peer.get(), POLLIN, 0});
        if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
        if (fds[0].revents & POLLIN) {
          peers.emplace_back(::accept4(listener_.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
          ++connections_;
        }
        for (size_t i = 1; i < fds.size(); ++i) {
          if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
          char buffer[4096];
          const ssize_t got = ::recv(fds[i].fd, buffer, sizeof buffer, MSG_DONTWAIT);
          std::lock_guard<std::mutex> lock(mu_);
          if (got > 0) received_.append(buffer, static_cast<size_t>(got));
        }
      }
    });
  }
  ~RecordingLeader() {
    stop_ = true;
    reader_.join();
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", listener_.port); }
  int connections() const { return connections_; }
  std::string received() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }

 private:
  SilentListener listener_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::mutex mu_;
  std::string received_;
  std::thread reader_;
};

// Without TLS the token would cross to whatever address the leader key holds: an etcd-v3
// agent, `ddprun status` and `ddprun stop` with a token and no TLS are refused before they
// read etcd, naming the fix. Without a token, the same run goes on (nothing secret to send).
TEST(EtcdV3Hostile, ATokenWithoutTlsIsRefusedBeforeAnythingIsSent) {
  std::unique_ptr<EtcdServer> etcd = EtcdServer::Start();
  ASSERT_NE(etcd, nullptr);
  RecordingLeader forged;
  ASSERT_EQ(etcd->Ctl({"put", kLeaderKey, forged.address()}).exit_code, 0);
  TempDir dir;
  const std::map<std::string, std::optional<std::string>> with_token = {
      {"DDPRUN_RDZV_TOKEN", kToken}};
  ProcessResult agent = RunProcess(Agent(*etcd, 1, "2", dir.path()), with_token);
  EXPECT_EQ(agent.exit_code, 2) << agent.err;
  EXPECT_THAT(agent.err, HasSubstr("--rdzv-backend=etcd-v3 with a token (DDPRUN_RDZV_TOKEN or "
                                   "--rdzv-conf token_file) needs TLS to the run's leader"));
  for (const char* command : {"status", "stop"}) {
    ProcessResult admin = RunProcess({kDdprun, command, "--rdzv-backend=etcd-v3",
                                      "--rdzv-endpoint=" + etcd->endpoint(), "--rdzv-id=job"},
                                     with_token);
    EXPECT_EQ(admin.exit_code, 2) << command << ": " << admin.err;
    EXPECT_THAT(admin.err, HasSubstr("needs TLS to the run's leader")) << command;
  }
  EXPECT_EQ(forged.connections(), 0) << "nothing went to the address etcd named";
  EXPECT_THAT(forged.received(), Not(HasSubstr(kToken)));
}

// With TLS and a token, a forged leader gets a TLS handshake it cannot finish, never the
// token; the rightful leader, elected once the forged key is gone, runs the job.
TEST(EtcdV3Hostile, OverTlsAForgedLeaderGetsNoTokenAndTheRightfulOneRunsTheJob) {
  TempDir certs;
  ASSERT_TRUE(MakeTestCertificates(certs).ok());
  std::unique_ptr<EtcdServer> etcd = EtcdServer::Start();
  ASSERT_NE(etcd, nullptr);
  RecordingLeader forged;
  ASSERT_EQ(etcd->Ctl({"put", kLeaderKey, forged.address()}).exit_code, 0);
  TempDir dir;
  const std::string tls =
      absl::StrCat("tls_cert=", certs / "node.pem", ",tls_key=", certs / "node.key",
                   ",tls_ca=", certs / "ca.pem");
  const std::map<std::string, std::optional<std::string>> env = {{"DDPRUN_RDZV_TOKEN", kToken},
                                                                 {"LOGLEVEL", "INFO"}};
  auto a = ChildProcess::Start(Agent(*etcd, 1, "2", dir.path(), tls), env);
  auto b = ChildProcess::Start(Agent(*etcd, 2, "2", dir.path(), tls), env);
  ProcessResult status = RunProcess(
      {kDdprun, "status", "--rdzv-backend=etcd-v3", "--rdzv-endpoint=" + etcd->endpoint(),
       "--rdzv-id=job", "--rdzv-conf=" + tls, "--timeout=3"},
      env);
  EXPECT_NE(status.exit_code, 0) << status.out;
  ASSERT_TRUE(WaitUntil([&] { return forged.connections() >= 3; }, absl::Seconds(30)))
      << "both agents and status connected to the forged leader: " << a->ErrSoFar();
  EXPECT_THAT(forged.received(), Not(HasSubstr(kToken)));
  EXPECT_FALSE(forged.received().empty()) << "a TLS client hello, at least";
  // The forged key goes: the agents elect one of theirs and run.
  ASSERT_EQ(etcd->Ctl({"del", kLeaderKey}).exit_code, 0);
  ASSERT_TRUE(WaitUntil([&] { return FileExists(dir / "env.1.r0"); }, absl::Seconds(30)))
      << a->ErrSoFar() << b->ErrSoFar();
  WriteFile(dir / "release", "");
  ProcessResult ra = a->Wait(absl::Seconds(30)), rb = b->Wait(absl::Seconds(30));
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_THAT(forged.received(), Not(HasSubstr(kToken)));
}

// A leader value that is no address (escape sequences, a forged log line, 100 KiB): refused,
// said once in one printable line that shows 64 bytes of it; status says the same.
TEST(EtcdV3Hostile, ALeaderKeyThatIsNoAddressIsRefusedAndSaidPrintably) {
  std::unique_ptr<EtcdServer> etcd = EtcdServer::Start();
  ASSERT_NE(etcd, nullptr);
  const std::string value =
      "\x1b]0;owned\x07\x1b[2J\n[ddprun] FORGED LINE\n" + std::string(100 * 1024, 'A');
  ASSERT_EQ(etcd->Ctl({"put", kLeaderKey, value}).exit_code, 0);
  TempDir dir;
  ProcessResult agent =
      RunProcess(Agent(*etcd, 1, "1:2", dir.path(), "join_timeout=3,last_call_timeout=0.2"), {});
  EXPECT_EQ(agent.exit_code, 75) << agent.err;
  EXPECT_EQ(CountLinesContaining(agent.err, "is not the work of ddprun"), 1) << agent.err;
  EXPECT_THAT(agent.err, HasSubstr(absl::StrCat("(", value.size(), " bytes)")));
  EXPECT_THAT(agent.err, HasSubstr("\\x1b]0;owned\\x07\\x1b[2J\\x0a[ddprun] FORGED LINE"));
  EXPECT_THAT(agent.err, Not(HasSubstr("\x1b"))) << "no raw escape reaches the terminal";
  EXPECT_EQ(CountLinesContaining(agent.err, "\n[ddprun] FORGED LINE"), 0);
  EXPECT_LT(agent.err.size(), 16u * 1024) << "the value is not printed whole";
  ProcessResult status = RunProcess({kDdprun, "status", "--rdzv-backend=etcd-v3",
                                     "--rdzv-endpoint=" + etcd->endpoint(), "--rdzv-id=job"});
  EXPECT_EQ(status.exit_code, 1) << status.err;
  EXPECT_THAT(status.err, HasSubstr("is not the work of ddprun"));
  EXPECT_THAT(status.err, Not(HasSubstr("\x1b")));
}

bool Leads(const ChildProcess& agent, int times) {
  return CountLinesContaining(agent.ErrSoFar(), "this node leads run 'job'") >= times;
}

// Of agents `a` (127.0.0.1) and `b` (127.0.0.2), the one etcd names the run's leader (null
// if neither within 30 s).
ChildProcess* LeaderInEtcd(const EtcdServer& etcd, ChildProcess& a, ChildProcess& b) {
  const int node = etcd.LeadingNode("job");
  return node == 1 ? &a : node == 2 ? &b : nullptr;
}

// Someone deletes the leader's key, then overwrites the next leader's with another address:
// each time the leader steps down at once (it does not lead beside another until its lease
// runs out), the workers go on, and once the key is the nodes' own again the run ends well.
TEST(EtcdV3Hostile, ALeaderStepsDownAtOnceWhenItsKeyIsDeletedOrOverwritten) {
  std::unique_ptr<EtcdServer> etcd = EtcdServer::Start();
  ASSERT_NE(etcd, nullptr);
  TempDir dir;
  // A lease of 30 s: a step-down by the lease alone would come far too late for the checks.
  const std::string conf = "lease_ttl=30";
  const std::map<std::string, std::optional<std::string>> info = {{"LOGLEVEL", "INFO"}};
  auto a = ChildProcess::Start(Agent(*etcd, 1, "2", dir.path(), conf), info);
  auto b = ChildProcess::Start(Agent(*etcd, 2, "2", dir.path(), conf), info);
  ASSERT_TRUE(
      WaitUntil([&] { return FileExists(dir / "env.0.r0") && FileExists(dir / "env.1.r0"); },
                absl::Seconds(30)))
      << a->ErrSoFar() << b->ErrSoFar();
  ChildProcess* leader = LeaderInEtcd(*etcd, *a, *b);
  ASSERT_NE(leader, nullptr) << a->ErrSoFar() << b->ErrSoFar();

  absl::Time changed = absl::Now();
  ASSERT_EQ(etcd->Ctl({"del", kLeaderKey}).exit_code, 0);
  // The other node may put its own key before the leader's watch reads the change: then the
  // leader sees its key overwritten, not deleted. Either way it steps down at once.
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string said = leader->ErrSoFar();
        return absl::StrContains(said, "was deleted (not by ddprun)") ||
               absl::StrContains(said, "was overwritten (not by ddprun)");
      },
      absl::Seconds(10)))
      << leader->ErrSoFar();
  EXPECT_LT(absl::Now() - changed, absl::Seconds(5)) << "not the lease's 30 s";
  // A leader again (maybe the same node, elected anew).
  ASSERT_TRUE(
      WaitUntil([&] { return Leads(*a, 1) + Leads(*b, 1) == 2 || Leads(*a, 2) || Leads(*b, 2); },
                absl::Seconds(20)))
      << a->ErrSoFar() << b->ErrSoFar();
  leader = LeaderInEtcd(*etcd, *a, *b);
  ASSERT_NE(leader, nullptr) << a->ErrSoFar() << b->ErrSoFar();

  SilentListener elsewhere;
  const char* overwritten = "was overwritten (not by ddprun) with";
  const int seen = CountLinesContaining(leader->ErrSoFar(), overwritten);  // by step one
  changed = absl::Now();
  ASSERT_EQ(etcd->Ctl({"put", kLeaderKey, absl::StrCat("127.0.0.1:", elsewhere.port)}).exit_code,
            0);
  ASSERT_TRUE(
      WaitUntil([&] { return CountLinesContaining(leader->ErrSoFar(), overwritten) > seen; },
                absl::Seconds(10)))
      << leader->ErrSoFar();
  EXPECT_LT(absl::Now() - changed, absl::Seconds(5));
  // The forged address goes; the nodes elect one of theirs and the run ends well.
  ASSERT_EQ(etcd->Ctl({"del", kLeaderKey}).exit_code, 0);
  WriteFile(dir / "release", "");
  ProcessResult ra = a->Wait(absl::Seconds(60)), rb = b->Wait(absl::Seconds(60));
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_FALSE(FileExists(dir / "env.0.r1")) << "the workers went on: no new round";
}

}  // namespace
}  // namespace ddprun::testing
