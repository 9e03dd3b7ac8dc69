#include "agent/health/health_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "agent/health/health_check_process.h"

namespace ddprun {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(HealthCheckTest, TheTailKeepsTheLastLinesAndSetsTheSkippedOnesApart) {
  std::string output = "ddprun-health-skipped: NVML could not be loaded\n";
  for (int i = 0; i < 30; ++i) absl::StrAppend(&output, "line ", i, "  \n");
  std::vector<std::string> skipped;
  const std::string tail = HealthCheckTail(output, &skipped);
  EXPECT_THAT(skipped, ElementsAre("NVML could not be loaded"));
  EXPECT_EQ(tail.substr(0, 8), "line 10\n");
  EXPECT_EQ(tail.substr(tail.size() - 7), "line 29");
  const std::string huge = HealthCheckTail(std::string(100000, 'x'), nullptr);
  EXPECT_EQ(huge.size(), kHealthCheckTailBytes + 3);  // "..." and the last bytes
}

TEST(HealthCheckTest, TheArgvCarriesOnlyWhatIsChecked) {
  HealthCheckSettings s;
  s.command = "/opt/check.sh";
  EXPECT_THAT(HealthCheckArgv("/usr/bin/ddprun", s),
              ElementsAre("/usr/bin/ddprun", kHealthCheckMode, "--", "/opt/check.sh"));
  s.builtin = true;
  s.expected_gpus = 8;
  s.min_free_disk_bytes = 1024;
  s.disk_path = "/logs";
  EXPECT_THAT(HealthCheckArgv("ddprun", s),
              ElementsAre("ddprun", kHealthCheckMode, "--builtin", "--gpus", "8", "--min-free-disk",
                          "1024", "--disk-path", "/logs", "--", "/opt/check.sh"));
}

TEST(HealthCheckTest, TheBuiltinRuleNamesEachProblem) {
  NodeFacts facts;
  EXPECT_THAT(BuiltinProblems(facts), IsEmpty());
  facts.expected_gpus = 8;
  facts.visible_gpus = 7;
  facts.unusable_gpus = {"GPU 3: 2 uncorrected ECC errors since the driver loaded"};
  facts.min_free_disk_bytes = int64_t{10} << 30;
  facts.free_disk_bytes = int64_t{1} << 29;
  facts.disk_path = "/logs";
  EXPECT_THAT(BuiltinProblems(facts),
              ElementsAre("7 GPUs are visible, 8 were when the agent started "
                          "(--nproc-per-node=gpu): a GPU is lost (nvidia-smi, dmesg for Xid "
                          "errors)",
                          "GPU 3: 2 uncorrected ECC errors since the driver loaded",
                          "0.5 GiB free in /logs, below --health-check-min-free-disk=10.0 GiB"));
  facts.visible_gpus = 8;
  facts.unusable_gpus.clear();
  facts.free_disk_bytes = facts.min_free_disk_bytes;
  EXPECT_THAT(BuiltinProblems(facts), IsEmpty());
}

}  // namespace
}  // namespace ddprun
