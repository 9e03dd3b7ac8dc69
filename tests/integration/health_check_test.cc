// One node's health checks (--health-check, docs/node-health.md): run before every join, a
// failing or stuck one keeps the node out for --node-cooldown and says why; the agent tries
// again after the cooldown, or leaves (exit 69) when the cooldown is the rest of the job.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string ThisHost() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

TEST(HealthChecks, AFailingCheckKeepsTheNodeOutAndWithNoCooldownTheAgentLeaves) {
  ProcessResult r = RunProcess(
      DdprunWithTestWorker({"--nproc-per-node=1", "--node-cooldown=0",
                            "--health-check=echo 'Xid 79: GPU has fallen off the bus' >&2; exit 3"},
                           {"exit", "0"}));
  EXPECT_EQ(r.exit_code, 69) << r.err;
  EXPECT_THAT(r.err, HasSubstr("health check failed, so it does not join this round"));
  EXPECT_THAT(r.err, HasSubstr("it ended with exit code 3; its last output:\n"
                               "Xid 79: GPU has fallen off the bus"));
  EXPECT_THAT(r.err, HasSubstr("excluded for the rest of the job"));
  EXPECT_THAT(r.err, HasSubstr("exits 69"));
}

// The check fails once, then passes: the node joins after its cooldown and the job runs. The
// check sees the node's environment and the round's facts.
TEST(HealthChecks, AfterTheCooldownTheCheckRunsAgainAndAHealthyNodeJoins) {
  TempDir dir;
  const std::string seen = dir.path() + "/seen";
  const std::string facts = dir.path() + "/facts";
  const std::string check =
      absl::StrCat("env > ", facts, "; if [ -e ", seen, " ]; then exit 0; fi; touch ", seen,
                   "; echo 'first run: not yet' >&2; exit 1");
  ProcessResult r = RunProcess(DdprunWithTestWorker({"--nproc-per-node=2", "--node-cooldown=0.2",
                                                     "--rdzv-id=hc-job", "--health-check=" + check},
                                                    {"exit", "0"}),
                               {{"MY_SITE_VARIABLE", "kept"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("first run: not yet"));
  EXPECT_THAT(r.err,
              HasSubstr("asks to join again in 200ms (--node-cooldown), after its health check"));
  const std::map<std::string, std::string> env = ParseEnvFile(facts);
  EXPECT_EQ(env.count("MY_SITE_VARIABLE") ? env.at("MY_SITE_VARIABLE") : "", "kept");
  EXPECT_EQ(env.count("LOCAL_WORLD_SIZE") ? env.at("LOCAL_WORLD_SIZE") : "", "2");
  EXPECT_EQ(env.count("TORCHELASTIC_RUN_ID") ? env.at("TORCHELASTIC_RUN_ID") : "", "hc-job");
  EXPECT_EQ(env.count("DDPRUN_HEALTH_CHECK_ROUND") ? env.at("DDPRUN_HEALTH_CHECK_ROUND") : "", "0");
  EXPECT_EQ(env.count("DDPRUN_NODE_HOST") ? env.at("DDPRUN_NODE_HOST") : "", ThisHost());
}

// A stuck check is killed at --health-check-timeout with what it started, and counts as failed.
TEST(HealthChecks, ACheckStillRunningAtTheTimeoutIsKilledWithItsChildren) {
  TempDir dir;
  const std::string pid_file = dir.path() + "/pid";
  ProcessResult r = RunProcess(DdprunWithTestWorker(
      {"--nproc-per-node=1", "--node-cooldown=0", "--health-check-timeout=0.3",
       absl::StrCat("--health-check=sleep 1000 & echo $! > ", pid_file, "; wait")},
      {"exit", "0"}));
  EXPECT_EQ(r.exit_code, 69) << r.err;
  EXPECT_THAT(r.err, HasSubstr("it did not finish within 300ms (--health-check-timeout)"));
  int sleeper = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(pid_file)), &sleeper));
  EXPECT_TRUE(WaitUntil([&] { return !ProcessAlive(sleeper); }, absl::Seconds(5)))
      << "the check's child " << sleeper << " outlived it";
}

TEST(HealthChecks, TheBuiltinCheckReadsFreeDiskAndSaysOnceWhatItSkipped) {
  TempDir logs;
  ProcessResult r = RunProcess(
      DdprunWithTestWorker({"--nproc-per-node=1", "--node-cooldown=0", "--health-check=builtin",
                            "--health-check-min-free-disk=1000000000", "--log-dir=" + logs.path()},
                           {"exit", "0"}));
  EXPECT_EQ(r.exit_code, 69) << r.err;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat(" free in ", logs.path(),
                                            ", below --health-check-min-free-disk=")));
  // This machine has no NVIDIA driver: the check says so (once), and is not failed for it.
  EXPECT_THAT(r.err, HasSubstr("skipped: NVML (libnvidia-ml.so.1) could not be loaded"));

  ProcessResult healthy = RunProcess(
      DdprunWithTestWorker({"--nproc-per-node=1", "--health-check=builtin",
                            "--health-check-min-free-disk=0.001", "--log-dir=" + logs.path()},
                           {"exit", "0"}));
  EXPECT_EQ(healthy.exit_code, 0) << healthy.err;
  EXPECT_THAT(healthy.err, Not(HasSubstr("health check failed")));
}

TEST(HealthChecks, AHostInExcludeHostsIsRefusedNamingTheOption) {
  ProcessResult r = RunProcess(DdprunWithTestWorker(
      {"--nproc-per-node=1", "--exclude-hosts=some-other-host," + ThisHost()}, {"exit", "0"}));
  EXPECT_EQ(r.exit_code, 69) << r.err;
  EXPECT_THAT(r.err, HasSubstr("it is listed in --exclude-hosts (take it off the list"));
  EXPECT_THAT(r.err, Not(HasSubstr("rank 0")));  // no worker ever started
}

// The example checks of examples/health-checks, against recorded nvidia-smi output (both
// layouts drivers print) and a fake ddp-allreduce: each fails for what it looks for, and
// names it.
class ExampleChecks : public ::testing::Test {
 protected:
  ProcessResult Run(const std::string& script,
                    std::map<std::string, std::optional<std::string>> env) {
    env["PATH"] = dir_.path() + ":/usr/bin:/bin";
    return RunProcess({"/bin/sh", kSourceDir + "/examples/health-checks/" + script}, env);
  }
  void FakeSmi(const std::string& output) {
    WriteFile(dir_.path() + "/smi.txt", output);
    WriteFile(dir_.path() + "/nvidia-smi", "#!/bin/sh\ncat " + dir_.path() + "/smi.txt\n", 0755);
  }
  TempDir dir_;
};

constexpr char kSmiNewLayout[] = R"(GPU 00000000:07:00.0
    ECC Errors
        Volatile
            SRAM Uncorrectable Parity     : 0
            DRAM Correctable              : 12
            DRAM Uncorrectable            : %s
        Aggregate
            DRAM Uncorrectable            : 4
    Retired Pages
        Pending Page Blacklist            : %s
)";

constexpr char kSmiOldLayout[] = R"(GPU 00000000:0F:00.0
    ECC Errors
        Volatile
            Single Bit
                Device Memory             : 7
                Total                     : 7
            Double Bit
                Device Memory             : %s
                Total                     : %s
        Aggregate
            Double Bit
                Total                     : 9
)";

TEST_F(ExampleChecks, GpuEccFailsForVolatileUncorrectableErrorsAndPendingRetirementOnly) {
  FakeSmi(absl::StrFormat(kSmiNewLayout, "0", "No"));
  ProcessResult r = Run("gpu-ecc.sh", {});
  EXPECT_EQ(r.exit_code, 0) << r.err;  // correctable and lifetime (aggregate) counts pass
  FakeSmi(absl::StrFormat(kSmiNewLayout, "3", "Yes"));
  r = Run("gpu-ecc.sh", {});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("GPU 00000000:07:00.0: 3 uncorrectable ECC errors (DRAM "
                               "Uncorrectable, since the driver loaded)"));
  EXPECT_THAT(r.err, HasSubstr("GPU 00000000:07:00.0: retired pages wait for a GPU reset"));
  FakeSmi(absl::StrFormat(kSmiOldLayout, "0", "0"));
  EXPECT_EQ(Run("gpu-ecc.sh", {}).exit_code, 0);
  FakeSmi(absl::StrFormat(kSmiOldLayout, "2", "2"));
  r = Run("gpu-ecc.sh", {});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("GPU 00000000:0F:00.0: 2 uncorrectable ECC errors (Total"));
}

TEST_F(ExampleChecks, NcclAllReduceFailsForWrongElementsAndABandwidthBelowTheFloor) {
  // The fake ddprun checks that the job's variables do not reach the inner one-node job.
  WriteFile(dir_.path() + "/fake-ddprun",
            "#!/bin/sh\n[ -z \"${PET_NNODES:-}${TORCHELASTIC_RUN_ID:-}\" ] || "
            "{ echo leaked >&2; exit 9; }\n"
            "while [ \"$1\" != --no-python ]; do shift; done; shift; exec \"$@\"\n",
            0755);
  WriteFile(
      dir_.path() + "/fake-allreduce",
      "#!/bin/sh\necho '# ddp-allreduce: nranks 8'\n"
      "echo '           8     2  float  sum  -1   10.0   0.00   0.00  0   10.0   0.00   0.00  0'\n"
      "echo \"    67108864 16777216  float  sum  -1  300.0 223.00 ${BUSBW} ${WRONG}  300.0 "
      "223.00 223.70  0\"\n",
      0755);
  std::map<std::string, std::optional<std::string>> env = {
      {"DDPRUN", dir_.path() + "/fake-ddprun"},
      {"DDP_ALLREDUCE", dir_.path() + "/fake-allreduce"},
      {"PET_NNODES", "4"},
      {"TORCHELASTIC_RUN_ID", "the-real-job"},
      {"BUSBW", "223.70"},
      {"WRONG", "0"}};
  ProcessResult r = Run("nccl-allreduce.sh", env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  env["MIN_BUSBW_GBPS"] = "300";
  r = Run("nccl-allreduce.sh", env);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("bus bandwidth 223.70 GB/s at 67108864 bytes, below "
                               "MIN_BUSBW_GBPS=300"));
  env["MIN_BUSBW_GBPS"] = std::nullopt;
  env["WRONG"] = "5";
  r = Run("nccl-allreduce.sh", env);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("5 wrong elements at 67108864 bytes"));
}

}  // namespace
}  // namespace ddprun::testing
