// Real PyTorch (Debian's python3-torch) under ddprun: a DDP script runs unchanged, and the
// environment ddprun gives workers has every variable a real torchrun gives them.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/compat/compat_paths.h"
#include "tests/compat/ddp_results.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(Compat, DdpTrainsAndAllRanksEndWithIdenticalParameters) {
  TempDir out;
  ProcessResult r = RunProcess(
      {kDdprun, "--standalone", "--nproc-per-node=2", kCompatDir + "/ddp_train.py", out.path()},
      {{"PYTHON_EXEC", kPython}}, absl::Seconds(240));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  ExpectTrained(out, 2);
}

std::set<std::string> AddedNames(const std::string& env_file) {
  std::set<std::string> names;
  for (const auto& [key, value] : ParseEnvFile(env_file)) {
    if (getenv(key.c_str()) == nullptr) names.insert(key);
  }
  return names;
}

TEST(Compat, WorkersGetEveryVariableTorchrunSets) {
  TempDir torchrun_out, ddprun_out;
  const std::map<std::string, std::optional<std::string>> env = {{"PYTHON_EXEC", kPython},
                                                                 {"OMP_NUM_THREADS", std::nullopt}};
  ProcessResult t =
      RunProcess({kPython, kCompatDir + "/torchrun_py311.py", "--standalone", "--nproc_per_node=2",
                  "--monitor_interval=0.1", kCompatDir + "/env_dump.py", torchrun_out.path()},
                 env, absl::Seconds(120));
  ASSERT_EQ(t.exit_code, 0) << t.err;
  ProcessResult d = RunProcess({kDdprun, "--standalone", "--nproc_per_node=2",
                                kCompatDir + "/env_dump.py", ddprun_out.path()},
                               env, absl::Seconds(60));
  ASSERT_EQ(d.exit_code, 0) << d.err;
  for (const char* rank : {"0", "1"}) {
    const std::set<std::string> torchrun = AddedNames(torchrun_out / (std::string("env.") + rank));
    const std::set<std::string> ours = AddedNames(ddprun_out / (std::string("env.") + rank));
    ASSERT_GE(torchrun.size(), 15u);
    for (const std::string& name : torchrun) {
      EXPECT_TRUE(ours.count(name))
          << "torchrun sets " << name << " for rank " << rank << " but ddprun does not";
    }
    auto t_env = ParseEnvFile(torchrun_out / (std::string("env.") + rank));
    auto d_env = ParseEnvFile(ddprun_out / (std::string("env.") + rank));
    for (const char* same :
         {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
          "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "TORCHELASTIC_RESTART_COUNT",
          "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE", "NCCL_ASYNC_ERROR_HANDLING",
          "OMP_NUM_THREADS"}) {
      EXPECT_EQ(d_env[same], t_env[same]) << same << " for rank " << rank;
    }
  }
}

// A rank that raises takes its peers down with it (gloo's "Connection closed by peer"):
// whichever ddprun sees end first, on a busy machine too, the summary blames the rank that
// raised and names the Python that ran it.
TEST(Compat, TheRankThatRaisedIsTheRootCauseNotThePeerThatLostIt) {
  ProcessResult r =
      RunProcess({kDdprun, "--standalone", "--nproc-per-node=2", kCompatDir + "/peer_lost_job.py"},
                 {{"PYTHON_EXEC", kPython}}, absl::Seconds(240));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const size_t root = r.err.find("\nRoot Cause (");
  ASSERT_NE(root, std::string::npos) << r.err;
  const std::string root_cause = r.err.substr(root);
  EXPECT_THAT(root_cause, HasSubstr("rank      : 0 (local_rank: 0)")) << r.err;
  EXPECT_THAT(root_cause, HasSubstr("ValueError: bad batch at step 7"));
  EXPECT_THAT(root_cause, HasSubstr("Python: /usr/bin/python3 (PYTHON_EXEC)"));
  EXPECT_THAT(r.err, Not(HasSubstr("Workers meet at"))) << "one node: they meet on this host";
}

void ExpectTwoNodesTrain(const std::vector<std::string>& node0,
                         const std::vector<std::string>& node1, const TempDir& out) {
  const std::map<std::string, std::optional<std::string>> env = {{"PYTHON_EXEC", kPython}};
  auto a = ChildProcess::Start(node0, env);
  auto b = ChildProcess::Start(node1, env);
  ProcessResult ra = a->Wait(absl::Seconds(240));
  ProcessResult rb = b->Wait(absl::Seconds(240));
  ASSERT_EQ(ra.exit_code, 0) << ra.out << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.out << rb.err;
  ExpectTrained(out, 4);
}

TEST(Compat, DdpOnTwoAgentsWithTwoWorkersEachC10d) {
  TempDir out;
  const std::string endpoint = absl::StrCat("--rdzv-endpoint=127.0.0.1:", FreeLoopbackPort());
  auto node = [&](int n, const std::string& extra) {
    std::vector<std::string> argv = {kDdprun,
                                     "--nnodes=2",
                                     "--nproc-per-node=2",
                                     "--rdzv-backend=c10d",
                                     endpoint,
                                     "--rdzv-id=ddp",
                                     absl::StrCat("--local-addr=127.0.0.", n)};
    if (!extra.empty()) argv.push_back(extra);
    argv.push_back(kCompatDir + "/ddp_train.py");
    argv.push_back(out.path());
    return argv;
  };
  ExpectTwoNodesTrain(node(1, ""), node(2, "--rdzv-conf=is_host=0"), out);
}

TEST(Compat, DdpOnTwoAgentsWithTwoWorkersEachStatic) {
  TempDir out;
  const std::string port = absl::StrCat("--master-port=", FreeLoopbackPort());
  auto node = [&](int rank) {
    return std::vector<std::string>{kDdprun,
                                    "--nnodes=2",
                                    "--nproc-per-node=2",
                                    absl::StrCat("--node-rank=", rank),
                                    "--master-addr=127.0.0.1",
                                    port,
                                    absl::StrCat("--local-addr=127.0.0.", rank + 1),
                                    kCompatDir + "/ddp_train.py",
                                    out.path()};
  };
  ExpectTwoNodesTrain(node(0), node(1), out);
}

}  // namespace
}  // namespace ddprun::testing
