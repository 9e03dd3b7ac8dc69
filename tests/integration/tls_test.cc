// TLS with mutual authentication between agents and ddprun-master, with certificates this
// test makes with openssl (tests/support/test_certificates.h).

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"
#include "tests/support/test_certificates.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;

const std::string kMaster = DDPRUN_MASTER_BIN;

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeTestCertificates(dir_).ok());
    port_ = FreeLoopbackPort();
  }

  std::unique_ptr<ChildProcess> Master(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {kMaster,
                                     "--host=127.0.0.1",
                                     absl::StrCat("--port=", port_),
                                     "--tls-cert=" + dir_ / "node.pem",
                                     "--tls-key=" + dir_ / "node.key",
                                     "--tls-ca=" + dir_ / "ca.pem"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto master = ChildProcess::Start(argv);
    EXPECT_TRUE(
        WaitUntil([&] { return master->ErrSoFar().find("listening on") != std::string::npos; },
                  absl::Seconds(20)));
    return master;
  }

  // An agent of a 2-node job; `cert` names the certificate it shows ("" for none: plaintext).
  std::vector<std::string> Agent(int node, const std::string& cert, const std::string& conf = "") {
    std::string rdzv_conf = "is_host=0" + conf;
    if (!cert.empty()) {
      rdzv_conf += absl::StrCat(",tls_cert=", dir_ / (cert + ".pem"),
                                ",tls_key=", dir_ / (cert + ".key"), ",tls_ca=", dir_ / "ca.pem");
    }
    return DdprunWithTestWorker(
        {"--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d",
         absl::StrCat("--rdzv-endpoint=127.0.0.1:", port_), "--rdzv-id=tls",
         absl::StrCat("--local-addr=127.0.0.", node), "--rdzv-conf=" + rdzv_conf},
        {"env", dir_.path()});
  }

  TempDir dir_;
  int port_ = 0;
};

TEST_F(TlsTest, AgentsAndMasterWithMutualTlsAndTheTokenRunTheJob) {
  const std::string token = dir_.Write("token", "s3cret\n");
  auto master = Master({"--token-file=" + token});
  EXPECT_THAT(master->ErrSoFar(), HasSubstr("with TLS (clients need a certificate)"));
  auto a = ChildProcess::Start(Agent(1, "node"), {{"DDPRUN_RDZV_TOKEN", "s3cret"}});
  auto b = ChildProcess::Start(Agent(2, "node"), {{"DDPRUN_RDZV_TOKEN", "s3cret"}});
  ProcessResult ra = a->Wait(absl::Seconds(30));
  ProcessResult rb = b->Wait(absl::Seconds(30));
  EXPECT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_EQ(ParseEnvFile(dir_ / "env.3.0")["WORLD_SIZE"], "4");
  // Over TLS the token is still checked.
  ProcessResult wrong =
      RunProcess(Agent(1, "node"), {{"DDPRUN_RDZV_TOKEN", "wrong"}}, absl::Seconds(30));
  EXPECT_EQ(wrong.exit_code, 75);
  EXPECT_THAT(wrong.err, HasSubstr("the join token does not match"));
  kill(master->pid(), SIGTERM);
  EXPECT_EQ(master->Wait(absl::Seconds(10)).exit_code, 0);
}

// A master hosted by an agent has no socket of its own: the agent's store for its workers
// listens on the port and hands TLS connections to the master (gRPC's external acceptor).
TEST_F(TlsTest, AHostingAgentServesTlsOnThePortItSharesWithItsWorkersStore) {
  const std::string tls = absl::StrCat("tls_cert=", dir_ / "node.pem",
                                       ",tls_key=", dir_ / "node.key", ",tls_ca=", dir_ / "ca.pem");
  auto host = ChildProcess::Start(
      DdprunWithTestWorker({"--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d",
                            absl::StrCat("--rdzv-endpoint=127.0.0.1:", port_), "--rdzv-id=tls",
                            "--local-addr=127.0.0.1", "--rdzv-conf=" + tls},
                           {"env", dir_.path()}));
  auto b = ChildProcess::Start(Agent(2, "node"));
  ProcessResult rhost = host->Wait(absl::Seconds(30));
  ProcessResult rb = b->Wait(absl::Seconds(30));
  EXPECT_EQ(rhost.exit_code, 0) << rhost.err;
  EXPECT_EQ(rb.exit_code, 0) << rb.err;
  for (const char* file : {"env.0.0", "env.3.0"}) {
    auto env = ParseEnvFile(dir_ / file);
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1") << file;
    EXPECT_EQ(env["MASTER_PORT"], std::to_string(port_)) << file << ": the store shares the port";
    EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], "True") << file;
  }
}

// The same with both agents started as users start them: one command line, no
// --local-addr. Which node gets group rank 0 is then not fixed (its store is on the shared
// port only when it is the hosting agent), but every worker is told the same meeting point.
TEST_F(TlsTest, AgentsStartedWithTheSameLineAndNoLocalAddrRunTheJobOverTls) {
  const std::vector<std::string> agent = DdprunWithTestWorker(
      {"--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d",
       absl::StrCat("--rdzv-endpoint=127.0.0.1:", port_), "--rdzv-id=tls",
       absl::StrCat("--rdzv-conf=tls_cert=", dir_ / "node.pem", ",tls_key=", dir_ / "node.key",
                    ",tls_ca=", dir_ / "ca.pem")},
      {"env", dir_.path()});
  auto a = ChildProcess::Start(agent);
  auto b = ChildProcess::Start(agent);
  ProcessResult ra = a->Wait(absl::Seconds(30));
  ProcessResult rb = b->Wait(absl::Seconds(30));
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  auto rank0 = ParseEnvFile(dir_ / "env.0.0");
  EXPECT_EQ(rank0["MASTER_ADDR"], "127.0.0.1");
  for (const char* file : {"env.1.0", "env.2.0", "env.3.0"}) {
    auto env = ParseEnvFile(dir_ / file);
    EXPECT_EQ(env["WORLD_SIZE"], "4") << file;
    EXPECT_EQ(env["MASTER_ADDR"], rank0["MASTER_ADDR"]) << file;
    EXPECT_EQ(env["MASTER_PORT"], rank0["MASTER_PORT"]) << file;
    EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], "True") << file;
  }
}

TEST_F(TlsTest, AnAgentWithACertificateTheMasterDoesNotTrustIsKeptOut) {
  auto master = Master();
  ProcessResult r = RunProcess(Agent(1, "rogue", ",join_timeout=1,keep_alive_interval=0.5"), {},
                               absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_THAT(r.err, HasSubstr("got no round within join_timeout"));
  EXPECT_THAT(r.err,
              HasSubstr("with TLS: is this node's tls_cert signed by the CA the master trusts"));
  EXPECT_FALSE(FileExists(dir_ / "env.0.0"));
  kill(master->pid(), SIGTERM);
  EXPECT_EQ(master->Wait(absl::Seconds(10)).exit_code, 0);
}

TEST_F(TlsTest, APlaintextAgentIsKeptOut) {
  auto master = Master();
  ProcessResult r =
      RunProcess(Agent(1, "", ",join_timeout=1,keep_alive_interval=0.5"), {}, absl::Seconds(30));
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_THAT(
      r.err,
      HasSubstr("does the master use TLS? then give this node tls_cert, tls_key and tls_ca"));
  EXPECT_FALSE(FileExists(dir_ / "env.0.0"));
  kill(master->pid(), SIGTERM);
  master->Wait(absl::Seconds(10));
}

TEST_F(TlsTest, TlsSettingsAreAllOrNoneAndMustBeReadable) {
  ProcessResult half = RunProcess(
      DdprunWithTestWorker({"--rdzv-conf=tls_cert=" + dir_ / "node.pem"}, {"env", dir_.path()}));
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_THAT(half.err, HasSubstr("TLS needs all three of tls_cert, tls_key and tls_ca"));
  ProcessResult missing = RunProcess(
      DdprunWithTestWorker({absl::StrCat("--rdzv-conf=tls_cert=", dir_ / "node.pem",
                                         ",tls_key=/no/such.key,tls_ca=", dir_ / "ca.pem")},
                           {"env", dir_.path()}));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("--rdzv-conf tls_key='/no/such.key' cannot be read"));
  ProcessResult master = RunProcess({kMaster, "--tls-cert=" + dir_ / "node.pem"});
  EXPECT_EQ(master.exit_code, 2);
  EXPECT_THAT(master.err, HasSubstr("ddprun-master: TLS needs all three"));
}

}  // namespace
}  // namespace ddprun::testing
