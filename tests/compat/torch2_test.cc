// torch 2.x (Debian trixie's 2.6, or sid's 2.14, in a root made by scripts/torch2-root.sh)
// against ddprun: its TCPStore client (the 2.2+ dialect: VALIDATE, PING, CANCEL_WAIT, ...)
// on the agent's store, and DDP workers under ddprun, a restart included: torch 2.x workers
// put no attempt in their keys, and a store kept across attempts hands the next one a dead
// peer's address (PyTorch #135712, torchrun's static backend). scripts/test.sh makes the
// root when run as root and passes it as DDPRUN_TORCH2_ROOT; without it these tests skip.

#include <signal.h>
#include <stdlib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;

const std::string kCompatDir = kSourceDir + "/tests/compat";
const std::string kTorch2Python = kCompatDir + "/torch2_python.sh";

class Torch2 : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* root = ::getenv("DDPRUN_TORCH2_ROOT");
    if (root == nullptr || *root == '\0') {
      GTEST_SKIP() << "DDPRUN_TORCH2_ROOT is not set: scripts/test.sh makes the torch 2.x root "
                      "(scripts/torch2-root.sh) when run as root";
    }
  }

  // Every rank of a `world`-worker ddp_train.py job trained to the same parameters; their digest.
  static std::string ExpectTrained(const TempDir& out, int world) {
    std::string digest;
    for (int rank = 0; rank < world; ++rank) {
      std::vector<std::string> fields = absl::StrSplit(
          absl::StripAsciiWhitespace(ReadFile(out / absl::StrCat("rank", rank, ".txt"))), ' ');
      if (fields.size() != 3u) {
        ADD_FAILURE() << "rank " << rank << " wrote no result";
        return "";
      }
      if (rank == 0) digest = fields[0];
      EXPECT_EQ(fields[0], digest) << "rank " << rank;
      double before = 0, after = 0;
      EXPECT_TRUE(absl::SimpleAtod(fields[1], &before) && absl::SimpleAtod(fields[2], &after));
      EXPECT_LT(after, before * 0.05) << "rank " << rank << " did not train";
    }
    return digest;
  }

  // Two ddprun agents of the static form on this host, torch 2.x workers, training into `out`.
  static void TrainStatic(const TempDir& out, const std::vector<std::string>& script_args,
                          const std::vector<std::string>& extra = {}) {
    const std::string port = absl::StrCat("--master-port=", FreeLoopbackPort());
    std::vector<std::unique_ptr<ChildProcess>> agents;
    for (int rank = 0; rank < 2; ++rank) {
      std::vector<std::string> argv = {kDdprun, "--nnodes=2", "--nproc-per-node=2",
                                       absl::StrCat("--node-rank=", rank), "--master-addr=127.0.0.1",
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

TEST_F(Torch2, ItsTcpStoreClientIsServedEveryMethod) {
  auto server = ChildProcess::Start({AGENT_STORE_SERVE_BIN});
  int port = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::string_view err = server->ErrSoFar();
        return absl::ConsumePrefix(&err, "port ") &&
               absl::SimpleAtoi(absl::StripAsciiWhitespace(err.substr(0, err.find('\n'))), &port);
      },
      absl::Seconds(10)));
  ProcessResult sweep = RunProcess({kTorch2Python, kCompatDir + "/tcpstore_client.py", "sweep",
                                    "127.0.0.1", std::to_string(port)},
                                   {}, absl::Seconds(180));
  EXPECT_EQ(sweep.exit_code, 0) << sweep.out << sweep.err;
  EXPECT_THAT(sweep.out, HasSubstr("sweep ok (torch 2."));
  EXPECT_THAT(sweep.out, HasSubstr("check, append, multi_get, multi_set"));
  TempDir out;
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(ChildProcess::Start({kTorch2Python, kCompatDir + "/tcpstore_client.py", "pg",
                                         "127.0.0.1", std::to_string(port), std::to_string(rank), "2",
                                         out.path()}));
  }
  for (auto& rank : ranks) {
    ProcessResult r = rank->Wait(absl::Seconds(180));
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
  EXPECT_EQ(ReadFile(out / "pg.0"), "3.0\n");
  EXPECT_EQ(ReadFile(out / "pg.1"), "3.0\n");
  ::kill(server->pid(), SIGTERM);
  ProcessResult r = server->Wait(absl::Seconds(10));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("refused"))) << r.err;
}

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
    auto launch = ParseEnvFile(crashed / absl::StrCat("launch", rank, ".txt"));
    EXPECT_EQ(launch["TORCHELASTIC_RESTART_COUNT"], "1");
    EXPECT_EQ(launch["TORCHELASTIC_USE_AGENT_STORE"], "True");
  }
}

TEST_F(Torch2, DdpWorkersTrainOnTheC10dForm) {
  TempDir out;
  const std::string endpoint = absl::StrCat("--rdzv-endpoint=127.0.0.1:", FreeLoopbackPort());
  std::vector<std::unique_ptr<ChildProcess>> agents;
  for (int node = 0; node < 2; ++node) {
    agents.push_back(ChildProcess::Start(
        {kDdprun, "--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d", endpoint,
         "--rdzv-id=ddp2", kCompatDir + "/ddp_train.py", out.path()},
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
