// torch 2.x (Debian trixie's 2.6, or sid's 2.14, in a root made by scripts/torch2-root.sh)
// DDP workers under ddprun, a restart included (its TCPStore client alone:
// agent_store_compat_test.cc; its torchrun's environment: env_compare_test.cc): torch 2.x workers
// put no attempt in their keys, and a store kept across attempts hands the next one a dead
// peer's address (PyTorch #135712, torchrun's static backend). scripts/test.sh makes the
// root when run as root and passes it as DDPRUN_TORCH2_ROOT; without it these tests skip.

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tests/compat/compat_paths.h"
#include "tests/compat/ddp_results.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;

class Torch2 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = WhyNoTorch2(); !why.empty()) GTEST_SKIP() << why;
  }

  // Two ddprun agents of the static form on this host, torch 2.x workers, training into `out`.
  static void TrainStatic(const TempDir& out, const std::vector<std::string>& script_args,
                          const std::vector<std::string>& extra = {}) {
    const std::string port = absl::StrCat("--master-port=", FreeLoopbackPort());
    std::vector<std::unique_ptr<ChildProcess>> agents;
    for (int rank = 0; rank < 2; ++rank) {
      std::vector<std::string> argv = {kDdprun,
                                       "--nnodes=2",
                                       "--nproc-per-node=2",
                                       absl::StrCat("--node-rank=", rank),
                                       "--master-addr=127.0.0.1",
                                       port};
      argv.insert(argv.end(), extra.begin(), extra.end());
      argv.insert(argv.end(), {kCompatDir + "/ddp_train.py", out.path()});
      argv.insert(argv.end(), script_args.begin(), script_args.end());
      agents.push_back(ChildProcess::Start(argv, {{"PYTHON_EXEC", kTorch2Python}}));
    }
    for (auto& agent : agents) {
      ProcessResult r = agent->Wait(absl::Seconds(240));
      EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    }
  }
};

// torchrun's static backend keeps one store across attempts, and torch 2.x's attempt 1 then
// reads attempt 0's gloo addresses and fails connecting to a dead peer (measured with 2.6
// and 2.14). ddprun's store starts every round empty: the restarted job trains to the
// parameters of a run that never crashed.
TEST_F(Torch2, DdpWorkersRestartedOnTheStaticFormTrainAsIfNothingHappened) {
  TempDir clean, crashed;
  TrainStatic(clean, {});
  const std::string uncrashed = ExpectTrained(clean, 4);
  TrainStatic(crashed, {"--crash", "2:5"}, {"--max-restarts=1"});
  EXPECT_EQ(ExpectTrained(crashed, 4), uncrashed);
  for (int rank = 0; rank < 4; ++rank) {
    auto launch = Launch(crashed, rank);
    EXPECT_EQ(launch["TORCHELASTIC_RESTART_COUNT"], "1");
    EXPECT_EQ(launch["TORCHELASTIC_USE_AGENT_STORE"], "True");
  }
}

TEST_F(Torch2, DdpWorkersTrainOnTheC10dForm) {
  TempDir out;
  const std::string endpoint = absl::StrCat("--rdzv-endpoint=127.0.0.1:", FreeLoopbackPort());
  std::vector<std::unique_ptr<ChildProcess>> agents;
  for (int node = 0; node < 2; ++node) {
    agents.push_back(
        ChildProcess::Start({kDdprun, "--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d",
                             endpoint, "--rdzv-id=ddp2", kCompatDir + "/ddp_train.py", out.path()},
                            {{"PYTHON_EXEC", kTorch2Python}}));
  }
  for (auto& agent : agents) {
    ProcessResult r = agent->Wait(absl::Seconds(240));
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  ExpectTrained(out, 4);
}

}  // namespace
}  // namespace ddprun::testing
