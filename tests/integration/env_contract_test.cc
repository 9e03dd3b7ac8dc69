// The environment each worker sees, checked on real processes started by the real binary.

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

TEST(EnvContract, EveryWorkerGetsTorchrunsVariables) {
  TempDir dir;
  ProcessResult r =
      RunProcess(DdprunWithTestWorker({"--standalone", "--nproc-per-node=3"}, {"env", dir.path()}),
                 {{"OMP_NUM_THREADS", std::nullopt}, {"DDPRUN_TEST_MARKER", "kept"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string run_id, port;
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE(rank);
    auto env = ParseEnvFile(dir / ("env." + std::to_string(rank) + ".0"));
    EXPECT_EQ(env["RANK"], std::to_string(rank));
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(rank));
    EXPECT_EQ(env["ROLE_RANK"], std::to_string(rank));
    EXPECT_EQ(env["GROUP_RANK"], "0");
    EXPECT_EQ(env["WORLD_SIZE"], "3");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "3");
    EXPECT_EQ(env["ROLE_WORLD_SIZE"], "3");
    EXPECT_EQ(env["GROUP_WORLD_SIZE"], "1");
    EXPECT_EQ(env["ROLE_NAME"], "default");
    EXPECT_EQ(env["MASTER_ADDR"], "localhost");
    EXPECT_THAT(env["MASTER_PORT"], MatchesRegex("[1-9][0-9]*"));
    EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "0");
    EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "0");
    EXPECT_THAT(
        env["TORCHELASTIC_RUN_ID"],
        MatchesRegex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"));
    EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], "False");
    EXPECT_THAT(env["TORCHELASTIC_ERROR_FILE"],
                HasSubstr("/" + env["TORCHELASTIC_RUN_ID"] + "/attempt_0/" + std::to_string(rank) +
                          "/error.json"));
    EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
    EXPECT_EQ(env["NCCL_ASYNC_ERROR_HANDLING"], "1");
    EXPECT_EQ(env["OMP_NUM_THREADS"], "1");
    EXPECT_EQ(env["DDPRUN_ROUND"], "0");
    EXPECT_EQ(env["TORCHELASTIC_SIGNALS_TO_HANDLE"], "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
    EXPECT_EQ(env["DDPRUN_TEST_MARKER"], "kept");  // the agent's environment is inherited
    if (rank == 0) {
      run_id = env["TORCHELASTIC_RUN_ID"];
      port = env["MASTER_PORT"];
    }
    EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], run_id);
    EXPECT_EQ(env["MASTER_PORT"], port);
  }
  EXPECT_THAT(r.err, HasSubstr("OMP_NUM_THREADS is not set: setting it to 1"));
}

TEST(EnvContract, UserSettingsWin) {
  TempDir dir;
  ProcessResult r = RunProcess(
      DdprunWithTestWorker({"--nproc-per-node=2", "--role=trainer", "--rdzv-id=job7",
                            "--max-restarts=4", "--master-addr=127.0.0.1", "--master-port=29555"},
                           {"env", dir.path()}),
      {{"OMP_NUM_THREADS", "3"}, {"NCCL_ASYNC_ERROR_HANDLING", "0"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto env = ParseEnvFile(dir / "env.1.0");
  EXPECT_EQ(env["ROLE_NAME"], "trainer");
  EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "job7");
  EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "4");
  EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
  EXPECT_EQ(env["MASTER_PORT"], "29555");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "3");
  EXPECT_EQ(env["NCCL_ASYNC_ERROR_HANDLING"], "0");
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("OMP_NUM_THREADS is not set")));
}

// The rendezvous token never reaches a worker's environment (crash reporters and
// /proc/PID/environ show it): workers get a file only this user can read, which the agent
// removes when it exits.
TEST(EnvContract, WorkersGetTheStoreTokenInAFileNotInTheirEnvironment) {
  TempDir dir;
  ProcessResult r =
      RunProcess({"/bin/sh", "-c",
                  absl::StrCat(kDdprun, " --nproc-per-node=2 --no-python /bin/sh -c 'stat -c %a ",
                               "\"$DDPRUN_STORE_TOKEN_FILE\" > ", dir / "mode.$RANK",
                               "; cat \"$DDPRUN_STORE_TOKEN_FILE\" > ", dir / "token.$RANK",
                               "; env > ", dir / "env.$RANK",
                               "; echo \"$DDPRUN_STORE_TOKEN_FILE\" > ", dir / "path.$RANK", "'")},
                 {{"DDPRUN_RDZV_TOKEN", "s3cret"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(rank);
    EXPECT_EQ(ReadFile(dir / absl::StrCat("mode.", rank)), "600\n");
    EXPECT_EQ(ReadFile(dir / absl::StrCat("token.", rank)), "s3cret");
    const std::string env = ReadFile(dir / absl::StrCat("env.", rank));
    EXPECT_THAT(env, ::testing::Not(HasSubstr("s3cret")));
    EXPECT_THAT(env, HasSubstr("DDPRUN_STORE_TOKEN_FILE="));
    std::string path = ReadFile(dir / absl::StrCat("path.", rank));
    path.pop_back();
    EXPECT_FALSE(FileExists(path)) << "the token file outlived the agent";
  }
}

TEST(EnvContract, PetVariablesAreDefaults) {
  TempDir dir;
  ProcessResult r = RunProcess(DdprunWithTestWorker({}, {"env", dir.path()}),
                               {{"PET_NPROC_PER_NODE", "2"}, {"PET_RDZV_ID", "from-pet"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto env = ParseEnvFile(dir / "env.1.0");
  EXPECT_EQ(env["WORLD_SIZE"], "2");
  EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "from-pet");
}

TEST(EnvContract, ArgumentsPassVerbatimWithLocalRankSubstituted) {
  ProcessResult r = RunProcess(
      DdprunWithTestWorker({"--nproc-per-node=2", "--local-ranks-filter=1", "-t", "1"},
                           {"args", "--nnodes=5", "-m", "rank=${local_rank}", "", "two words"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[default1]:arg=--nnodes=5\n[default1]:arg=-m\n"
                               "[default1]:arg=rank=1\n[default1]:arg=\n"
                               "[default1]:arg=two words\n"));
}

TEST(EnvContract, ShellCommandWithDashC) {
  ProcessResult r = RunProcess({kDdprun, "--nproc-per-node=2", "--no-python", "/bin/sh", "-c",
                                "echo \"shell rank $RANK of $WORLD_SIZE\""});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("shell rank 0 of 2"));
  EXPECT_THAT(r.out, HasSubstr("shell rank 1 of 2"));
}

TEST(EnvContract, PythonScriptsAndModulesRunWithUnbufferedPython) {
  TempDir dir;
  const std::string code =
      "import os, sys\n"
      "print('py', os.environ['RANK'], int('-u' in sys.orig_argv), sys.argv[1:])\n";
  WriteFile(dir / "train.py", code);
  WriteFile(dir / "trainmod.py", code);
  ProcessResult script = RunProcess({kDdprun, "--nproc-per-node=2", dir / "train.py", "--lr=0.1"});
  ASSERT_EQ(script.exit_code, 0) << script.err;
  EXPECT_THAT(script.out, HasSubstr("py 1 1 ['--lr=0.1']"));
  ProcessResult module = RunProcess({kDdprun, "-m", "trainmod", "x"}, {{"PYTHONPATH", dir.path()}});
  ASSERT_EQ(module.exit_code, 0) << module.err;
  EXPECT_THAT(module.out, HasSubstr("py 0 1 ['x']"));
}

TEST(EnvContract, PythonExecChoosesTheInterpreter) {
  TempDir dir;
  // A fake interpreter that shows how it was called.
  WriteFile(dir / "fakepython", "#!/bin/sh\necho \"fake $*\"\n", 0755);
  WriteFile(dir / "train.py", "");
  ProcessResult r =
      RunProcess({kDdprun, dir / "train.py", "a"}, {{"PYTHON_EXEC", dir / "fakepython"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("fake -u " + dir / "train.py" + " a"));
}

TEST(EnvContract, AutoWithoutGpusStartsOneWorkerPerCpu) {
  TempDir dir;
  ProcessResult r = RunProcess(DdprunWithTestWorker({"--nproc-per-node=auto"}, {"env", dir.path()}),
                               {{"CUDA_VISIBLE_DEVICES", ""}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  EXPECT_EQ(ParseEnvFile(dir / "env.0.0")["WORLD_SIZE"], std::to_string(cpus));
}

TEST(EnvContract, RelativeLogDirGivesWorkersAnAbsoluteErrorFile) {
  TempDir dir;
  ProcessResult r = RunProcess({"/bin/sh", "-c",
                                "cd " + dir.path() + " && exec " + kDdprun +
                                    " --log-dir=logs --rdzv-id=rel --no-python " + kTestWorker +
                                    " env " + dir.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseEnvFile(dir / "env.0.0")["TORCHELASTIC_ERROR_FILE"],
            dir.path() + "/logs/rel/attempt_0/0/error.json");
}

TEST(EnvContract, UnprefixedLinesOfTwoPythonWorkersNeverMixMidLine) {
  TempDir dir;
  // Unbuffered Python writes a print() in several pieces; on a shared terminal two workers'
  // pieces would mix. Through the agent every line arrives whole.
  WriteFile(
      dir / "talk.py",
      "import os\nr = os.environ['RANK']\nfor i in range(300):\n    print('rank', r, 'says', i)\n");
  ProcessResult r = RunProcess({kDdprun, "--nproc-per-node=2", dir / "talk.py"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
    EXPECT_TRUE(absl::StartsWith(line, "rank 0 says ") || absl::StartsWith(line, "rank 1 says "))
        << "mixed line: " << line;
    ++lines;
  }
  EXPECT_EQ(lines, 600);
}

}  // namespace
}  // namespace ddprun::testing
