// torchrun 2.9-main's options on real processes started by the real binary: the worker's
// accelerator (--virtual-local-rank), the tee prefix (--log-line-prefix-template), the
// filtered logs (--duplicate-*-filters) and the workers' CPUs and memory policy
// (--cpu-affinity, --numa-binding), read back by the workers themselves.

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "node/cpu_topology.h"
#include "node/host_info.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(VirtualLocalRank, EachWorkerSeesOnlyItsOwnDeviceAsLocalRankZero) {
  TempDir dir;
  ProcessResult r = RunProcess(
      DdprunWithTestWorker({"--standalone", "--nproc-per-node=2", "--virtual-local-rank"},
                           {"env", dir.path()}),
      {{"CUDA_VISIBLE_DEVICES", "3, 5"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int rank = 0; rank < 2; ++rank) {
    auto env = ParseEnvFile(dir / absl::StrCat("env.", rank, ".0"));
    EXPECT_EQ(env["RANK"], absl::StrCat(rank));
    EXPECT_EQ(env["LOCAL_RANK"], "0");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "2");
    EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], rank == 0 ? "3" : "5");
  }
}

TEST(VirtualLocalRank, WithoutAListTheIndexIsTheDevice) {
  TempDir dir;
  ProcessResult r = RunProcess(
      DdprunWithTestWorker({"--standalone", "--nproc-per-node=2", "--virtual-local-rank"},
                           {"env", dir.path()}),
      {{"CUDA_VISIBLE_DEVICES", std::nullopt}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseEnvFile(dir / "env.1.0")["CUDA_VISIBLE_DEVICES"], "1");
  EXPECT_EQ(ParseEnvFile(dir / "env.1.0")["LOCAL_RANK"], "0");
}

TEST(VirtualLocalRank, TooFewVisibleDevicesStopsBeforeAnythingStarts) {
  TempDir dir;
  ProcessResult r = RunProcess(
      DdprunWithTestWorker({"--standalone", "--nproc-per-node=3", "--virtual-local-rank"},
                           {"env", dir.path()}),
      {{"CUDA_VISIBLE_DEVICES", "0,1"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--virtual-local-rank: 2 devices are visible "
                               "(CUDA_VISIBLE_DEVICES='0,1') for 3 local ranks"));
  EXPECT_FALSE(FileExists(dir / "env.0.0"));
}

TEST(LogLinePrefixTemplate, FillsTheHostNameAndTheUnbracedFields) {
  ProcessResult r = RunProcess({kDdprun, "--standalone", "--nproc-per-node=2", "--tee=3",
                                "--log-line-prefix-template=[${hostname}|$rank|${local_rank}] ",
                                "--no-python", "/bin/sh", "-c", "echo hello"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[" + HostName() + "|0|0] hello\n"));
  EXPECT_THAT(r.out, HasSubstr("[" + HostName() + "|1|1] hello\n"));
}

TEST(LogLinePrefixTemplate, TorchrunsVariableIsTheFallback) {
  const std::vector<std::string> command = {kDdprun,   "--standalone", "--tee=3",   "--no-python",
                                            "/bin/sh", "-c",           "echo hello"};
  ProcessResult r =
      RunProcess(command, {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "<$role_name> "}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("<default> hello\n"));
  // PET_LOG_LINE_PREFIX_TEMPLATE (the option's own variable) wins over torchrun's.
  r = RunProcess(command, {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "<$role_name> "},
                           {"PET_LOG_LINE_PREFIX_TEMPLATE", "{${rank}} "}});
  EXPECT_THAT(r.out, HasSubstr("{0} hello\n"));
  // An empty option falls back too, as torchrun's `args.x or os.getenv(...)`.
  std::vector<std::string> empty = command;
  empty.insert(empty.begin() + 1, "--log-line-prefix-template=");
  r = RunProcess(empty, {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "<$role_name> "}});
  EXPECT_THAT(r.out, HasSubstr("<default> hello\n"));
}

TEST(DuplicateFilters, TeedLinesThatMatchAreAlsoInTheAttemptsFilteredFiles) {
  TempDir dir;
  ProcessResult r = RunProcess(
      {kDdprun, "--nproc-per-node=3", "--tee=3", "--local-ranks-filter=0,1", "--rdzv-id=filtered",
       "--log-dir=" + dir.path(), "--duplicate-stdout-filters=loss,,",
       "--duplicate-stderr-filters=NCCL,CUDA error", "--no-python", "/bin/sh", "-c",
       "echo step; echo loss, 0.$LOCAL_RANK; echo 'NCCL WARN x' >&2; echo 'ok' >&2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string out = ReadFile(dir / "filtered/attempt_0/filtered_stdout.log");
  EXPECT_THAT(out, HasSubstr("[default0]:loss, 0.0\n"));
  EXPECT_THAT(out, HasSubstr("[default1]:loss, 0.1\n"));
  EXPECT_THAT(out, Not(HasSubstr("step")));
  EXPECT_THAT(out, Not(HasSubstr("[default2]")));  // not shown, so not tee'd: as torchrun
  const std::string err = ReadFile(dir / "filtered/attempt_0/filtered_stderr.log");
  EXPECT_EQ(CountLinesContaining(err, "NCCL WARN x"), 2);
  EXPECT_THAT(err, Not(HasSubstr("ok")));
  // Each rank's own log still has everything.
  EXPECT_THAT(ReadFile(dir / "filtered/attempt_0/2/stdout.log"), HasSubstr("loss, 0.2"));
}

TEST(DuplicateFilters, EachAttemptHasItsOwnFilteredFile) {
  TempDir dir;
  const std::string marks = dir.path();
  // Rank 1 fails its first attempt after printing; the restart prints again.
  ProcessResult r = RunProcess(
      {kDdprun, "--nproc-per-node=2", "--tee=1", "--max-restarts=1", "--rdzv-id=again",
       "--log-dir=" + dir.path(), "--duplicate-stdout-filters=loss", "--no-python", "/bin/sh", "-c",
       "echo loss $TORCHELASTIC_RESTART_COUNT; "
       "if [ $LOCAL_RANK = 1 ] && [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then exit 3; fi"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string first = ReadFile(dir / "again/attempt_0/filtered_stdout.log");
  const std::string second = ReadFile(dir / "again/attempt_1/filtered_stdout.log");
  EXPECT_THAT(first, HasSubstr("[default1]:loss 0\n"));  // the failed rank's last words
  EXPECT_THAT(first, Not(HasSubstr("loss 1")));
  EXPECT_EQ(CountLinesContaining(second, "loss 1"), 2);
}

TEST(DuplicateFilters, WithoutTeeTheyHaveNoEffectAndSaySo) {
  ProcessResult r = RunProcess(
      {kDdprun, "--standalone", "--duplicate-stderr-filters=NCCL", "--no-python", "/bin/true"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--duplicate-stderr-filters has no effect: it copies tee'd "
                               "lines, and no local rank's stderr is tee'd; add --tee=2"));
}

// What a Python worker reads about itself: its CPUs and its memory policy.
constexpr char kReportBinding[] =
    "import os\n"
    "cpus = sorted(os.sched_getaffinity(0))\n"
    "policy = open('/proc/self/numa_maps').readline().split()[1]\n"
    "status = dict(l.split(':\\t') for l in open('/proc/self/status') if ':\\t' in l)\n"
    "print('rank', os.environ['LOCAL_RANK'], 'cpus', ','.join(map(str, cpus)), 'policy', policy,"
    " 'list', status['Cpus_allowed_list'].strip())\n";

std::set<int> MyCpus() { return *AllowedCpus(); }

TEST(CpuBinding, CpuAffinityListsBindEachWorker) {
  if (MyCpus().size() < 2 || MyCpus().count(0) == 0 || MyCpus().count(1) == 0) {
    GTEST_SKIP() << "needs CPUs 0 and 1";
  }
  ProcessResult r =
      RunProcess({kDdprun, "--standalone", "--nproc-per-node=2", "--tee=3", "--cpu-affinity=1:0",
                  "--no-python", "/usr/bin/python3", "-c", kReportBinding});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Lists bind CPUs only: memory follows the kernel's default (the node of those CPUs).
  EXPECT_THAT(r.out, HasSubstr("rank 0 cpus 1 policy default list 1\n"));
  EXPECT_THAT(r.out, HasSubstr("rank 1 cpus 0 policy default list 0\n"));
}

TEST(CpuBinding, NumaBindingBindsToTheNodeAndPrefersItsMemory) {
  // This machine's first NUMA node, all of its allowed CPUs (no accelerator: the node
  // follows the local rank).
  absl::StatusOr<CpuTopology> topology = LoadCpuTopology();
  ASSERT_TRUE(topology.ok()) << topology.status();
  std::set<int> node_cpus;
  const int node = *topology->numa_nodes.begin();
  for (const CpuTopology::Cpu& cpu : topology->cpus) {
    if (cpu.numa == node && MyCpus().count(cpu.id) > 0) node_cpus.insert(cpu.id);
  }
  ProcessResult r = RunProcess({kDdprun, "--standalone", "--tee=3", "--numa-binding=node",
                                "--no-python", "/usr/bin/python3", "-c", kReportBinding},
                               {{"LOGLEVEL", "INFO"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  if (r.err.find("refused set_mempolicy") != std::string::npos) {
    GTEST_SKIP() << "this machine refuses set_mempolicy (a seccomp profile): " << r.err;
  }
  const std::string list = FormatCpuList(node_cpus);
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("policy prefer:", node, " list ", list, "\n")));
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("local_rank 0 is bound to CPUs ", list,
                                            ", memory preferred on NUMA node ", node)));
}

TEST(CpuBinding, ExclusiveGivesEachWorkerItsOwnCores) {
  if (MyCpus().size() < 2) GTEST_SKIP() << "needs two CPUs";
  ProcessResult r = RunProcess({kDdprun, "--standalone", "--nproc-per-node=2", "--tee=3",
                                "--numa-binding=exclusive", "--no-python", "/usr/bin/python3", "-c",
                                kReportBinding});
  if (r.exit_code == 2 && r.err.find("physical cores for 2") != std::string::npos) {
    GTEST_SKIP() << "one physical core here: " << r.err;
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Two disjoint, non-empty sets.
  std::string rank0 = r.out.substr(r.out.find("rank 0 cpus ") + 12);
  std::string rank1 = r.out.substr(r.out.find("rank 1 cpus ") + 12);
  rank0 = rank0.substr(0, rank0.find(' '));
  rank1 = rank1.substr(0, rank1.find(' '));
  std::set<int> a = *ParseCpuList(rank0), b = *ParseCpuList(rank1);
  for (int cpu : a) EXPECT_EQ(b.count(cpu), 0u) << cpu;
}

TEST(CpuBinding, CpusOutsideTheAllowedSetStopBeforeAnythingStarts) {
  ProcessResult r = RunProcess({kDdprun, "--standalone", "--nproc-per-node=2",
                                "--cpu-affinity=0:4095", "--no-python", "/bin/true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--cpu-affinity: local rank 1's CPUs 4095 are not allowed for "
                               "ddprun"));
  r = RunProcess({kDdprun, "--standalone", "--nproc-per-node=2", "--cpu-affinity=0", "--no-python",
                  "/bin/true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("lists CPUs for 1 local ranks, but --nproc-per-node is 2"));
  r = RunProcess({kDdprun, "--standalone", "--numa-binding=cores", "--no-python", "/bin/true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("expected node, socket, exclusive or core-complex"));
}

}  // namespace
}  // namespace ddprun::testing
