// PyTorch's own TCPStore client (Debian's torch 1.13) against the TCPStore a ddprun agent
// serves: every public method, and a gloo process group created as torchrun's workers
// create it under TORCHELASTIC_USE_AGENT_STORE=True. The same server under real ddprun
// jobs: compat_test.cc and tests/netns.

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

const std::string kPython = "/usr/bin/python3";
const std::string kClient = kSourceDir + "/tests/compat/tcpstore_client.py";

class AgentStoreCompat : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = ChildProcess::Start({AGENT_STORE_SERVE_BIN});
    ASSERT_TRUE(WaitUntil([&] { return Port() > 0; }, absl::Seconds(10))) << server_->ErrSoFar();
  }
  void TearDown() override {
    ::kill(server_->pid(), SIGTERM);
    ProcessResult r = server_->Wait(absl::Seconds(10));
    EXPECT_THAT(r.err, ::testing::Not(::testing::HasSubstr("refused"))) << r.err;
  }
  int Port() const {
    absl::string_view err = server_->ErrSoFar();
    if (!absl::ConsumePrefix(&err, "port ")) return 0;
    int port = 0;
    return absl::SimpleAtoi(absl::StripAsciiWhitespace(err.substr(0, err.find('\n'))), &port) ? port : 0;
  }

  std::unique_ptr<ChildProcess> server_;
};

TEST_F(AgentStoreCompat, EveryPublicMethodOfPyTorchsClientWorks) {
  ProcessResult r = RunProcess({kPython, kClient, "sweep", "127.0.0.1", std::to_string(Port())},
                               {}, absl::Seconds(120));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("sweep ok"));
}

TEST_F(AgentStoreCompat, AGlooProcessGroupFormsOnTheAgentStore) {
  TempDir out;
  auto rank = [&](int r) {
    return ChildProcess::Start({kPython, kClient, "pg", "127.0.0.1", std::to_string(Port()),
                                std::to_string(r), "2", out.path()});
  };
  auto r0 = rank(0);
  auto r1 = rank(1);
  ProcessResult a = r0->Wait(absl::Seconds(120));
  ProcessResult b = r1->Wait(absl::Seconds(120));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(ReadFile(out / "pg.0"), "3.0\n");
  EXPECT_EQ(ReadFile(out / "pg.1"), "3.0\n");
}

}  // namespace
}  // namespace ddprun::testing
