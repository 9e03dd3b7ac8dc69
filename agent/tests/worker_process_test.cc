// Starting a worker bound to CPUs and a preferred NUMA node (--numa-binding, --cpu-affinity):
// the masks as the kernel takes them, and a real child reading its own affinity.

#include "agent/process/worker_process.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/unique_fd.h"
#include "node/cpu_topology.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

using ::testing::HasSubstr;

TEST(ProcessBinding, MasksHaveOneBitPerCpuAndNode) {
  const ProcessBinding binding = MakeProcessBinding({0, 63, 64, 1023}, 64);
  // A cpu_set_t at least (128 bytes), and words up to CPU 1023.
  ASSERT_EQ(binding.cpu_mask.size(), 1024 / 64u);
  EXPECT_EQ(binding.cpu_mask[0], 1UL | (1UL << 63));
  EXPECT_EQ(binding.cpu_mask[1], 1UL);
  EXPECT_EQ(binding.cpu_mask[15], 1UL << 63);
  ASSERT_EQ(binding.node_mask.size(), 2u);
  EXPECT_EQ(binding.node_mask[0], 0UL);
  EXPECT_EQ(binding.node_mask[1], 1UL);
  // CPU 5000: past a cpu_set_t, so the mask grows to hold it.
  EXPECT_EQ(MakeProcessBinding({5000}, -1).cpu_mask.size(), 5000 / 64 + 1u);
  EXPECT_TRUE(MakeProcessBinding({}, -1).cpu_mask.empty());
  EXPECT_TRUE(MakeProcessBinding({1}, -1).node_mask.empty());
}

TEST(ProcessBinding, TheChildRunsOnItsCpusWithItsMemoryPreferredBeforeExec) {
  const std::set<int> allowed = *AllowedCpus();
  const int cpu = *allowed.rbegin();
  testing::TempDir dir;
  absl::StatusOr<UniqueFd> out = OpenForAppend(dir / "out");
  ASSERT_TRUE(out.ok());
  const ProcessBinding binding = MakeProcessBinding({cpu}, 0);
  int mempolicy_errno = -1;
  SpawnSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "grep Cpus_allowed_list /proc/self/status; head -n 1 /proc/self/numa_maps"};
  spec.stdout_fd = out->get();
  spec.binding = &binding;
  spec.mempolicy_errno = &mempolicy_errno;
  absl::StatusOr<pid_t> pid = SpawnWorkerProcess(spec);
  ASSERT_TRUE(pid.ok()) << pid.status();
  int status = 0;
  ASSERT_EQ(::waitpid(*pid, &status, 0), *pid);
  const std::string seen = testing::ReadFile(dir / "out");
  EXPECT_THAT(seen, HasSubstr("Cpus_allowed_list:\t" + std::to_string(cpu) + "\n"));
  if (mempolicy_errno == 0) {
    EXPECT_THAT(seen, HasSubstr(" prefer:0 "));
  } else {
    EXPECT_EQ(mempolicy_errno, EPERM) << "only a seccomp filter may refuse it";
  }
  // The agent itself is not bound.
  EXPECT_EQ(*AllowedCpus(), allowed);
}

TEST(ProcessBinding, CpusTheKernelRefusesFailTheStartWithTheReason) {
  const ProcessBinding binding = MakeProcessBinding({kMaxCpus - 1}, -1);  // not on this machine
  SpawnSpec spec;
  spec.argv = {"/bin/true"};
  spec.binding = &binding;
  absl::StatusOr<pid_t> pid = SpawnWorkerProcess(spec);
  ASSERT_FALSE(pid.ok());
  EXPECT_THAT(std::string(pid.status().message()),
              HasSubstr("cannot bind '/bin/true' to the CPUs planned at start"));
}

}  // namespace
}  // namespace ddprun
