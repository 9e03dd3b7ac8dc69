// PyTorch's own TCPStore client against the TCPStore a ddprun agent serves: every public
// method, and a gloo process group created as torchrun's workers create it under
// TORCHELASTIC_USE_AGENT_STORE=True. With Debian's torch 1.13 (the dialect of 1.13 to 2.0),
// and with torch 2.x (2.2 and later: VALIDATE, PING, CANCEL_WAIT, ...) in the root
// scripts/torch2-root.sh makes (DDPRUN_TORCH2_ROOT; scripts/test.sh sets it as root). The
// same server under real ddprun jobs: compat_test.cc, torch2_test.cc and tests/netns.

#include <signal.h>
#include <stdlib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

const std::string kClient = kSourceDir + "/tests/compat/tcpstore_client.py";

class AgentStoreCompat : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (Torch2() && ::getenv("DDPRUN_TORCH2_ROOT") == nullptr) {
      GTEST_SKIP() << "DDPRUN_TORCH2_ROOT is not set: scripts/test.sh makes the torch 2.x root "
                      "(scripts/torch2-root.sh) when run as root";
    }
    server_ = ChildProcess::Start({AGENT_STORE_SERVE_BIN});
    ASSERT_TRUE(WaitUntil([&] { return Port() > 0; }, absl::Seconds(10))) << server_->ErrSoFar();
  }
  void TearDown() override {
    if (server_ == nullptr) return;
    ::kill(server_->pid(), SIGTERM);
    ProcessResult r = server_->Wait(absl::Seconds(10));
    EXPECT_THAT(r.err, ::testing::Not(::testing::HasSubstr("refused"))) << r.err;
  }
  int Port() const {
    const std::string text = server_->ErrSoFar();
    absl::string_view err = text;
    if (!absl::ConsumePrefix(&err, "port ")) return 0;
    int port = 0;
    return absl::SimpleAtoi(absl::StripAsciiWhitespace(err.substr(0, err.find('\n'))), &port) ? port
                                                                                              : 0;
  }

  bool Torch2() const { return std::string(GetParam()) == "2.x"; }
  // tcpstore_client.py with `args`, on this torch.
  std::vector<std::string> Client(std::vector<std::string> args) const {
    std::vector<std::string> argv = {
        Torch2() ? kSourceDir + "/tests/compat/torch2_python.sh" : "/usr/bin/python3", kClient};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  std::unique_ptr<ChildProcess> server_;
};

TEST_P(AgentStoreCompat, EveryPublicMethodOfPyTorchsClientWorks) {
  ProcessResult r =
      RunProcess(Client({"sweep", "127.0.0.1", std::to_string(Port())}), {}, absl::Seconds(180));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("sweep ok"));
  if (Torch2()) {
    EXPECT_THAT(r.out, ::testing::HasSubstr("check, append, multi_get, multi_set"));
  }
}

TEST_P(AgentStoreCompat, AGlooProcessGroupFormsOnTheAgentStore) {
  TempDir out;
  auto rank = [&](int r) {
    return ChildProcess::Start(
        Client({"pg", "127.0.0.1", std::to_string(Port()), std::to_string(r), "2", out.path()}));
  };
  auto r0 = rank(0);
  auto r1 = rank(1);
  ProcessResult a = r0->Wait(absl::Seconds(180));
  ProcessResult b = r1->Wait(absl::Seconds(180));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(ReadFile(out / "pg.0"), "3.0\n");
  EXPECT_EQ(ReadFile(out / "pg.1"), "3.0\n");
}

INSTANTIATE_TEST_SUITE_P(Torch, AgentStoreCompat, ::testing::Values("1.13", "2.x"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param) == "2.x" ? "Torch2" : "Torch113";
                         });

}  // namespace
}  // namespace ddprun::testing
