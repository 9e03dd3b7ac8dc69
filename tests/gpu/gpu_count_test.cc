// On a machine with NVIDIA GPUs: --nproc-per-node=gpu starts one worker per visible GPU,
// counted without linking CUDA, and honours CUDA_VISIBLE_DEVICES. Label `gpu`: run by
// tests/gpu/run.sh, and by scripts/test.sh only where nvidia-smi sees a GPU.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

int NvidiaSmiGpuCount() {
  ProcessResult r =
      RunProcess({"/bin/sh", "-c", "nvidia-smi -L"}, {{"CUDA_VISIBLE_DEVICES", std::nullopt}});
  return r.exit_code == 0 ? CountLinesContaining(r.out, "GPU ") : -1;
}

TEST(Gpu, NprocGpuStartsOneWorkerPerGpu) {
  const int gpus = NvidiaSmiGpuCount();
  ASSERT_GT(gpus, 0) << "the gpu label needs a visible NVIDIA GPU (nvidia-smi -L)";
  TempDir dir;
  ProcessResult r = RunProcess(DdprunWithTestWorker({"--nproc-per-node=gpu"}, {"env", dir.path()}),
                               {{"CUDA_VISIBLE_DEVICES", std::nullopt}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseEnvFile(dir / "env.0.0")["WORLD_SIZE"], std::to_string(gpus));
}

TEST(Gpu, CudaVisibleDevicesLimitsTheCount) {
  ASSERT_GT(NvidiaSmiGpuCount(), 0);
  TempDir dir;
  ProcessResult r = RunProcess(DdprunWithTestWorker({"--nproc-per-node=gpu"}, {"env", dir.path()}),
                               {{"CUDA_VISIBLE_DEVICES", "0"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseEnvFile(dir / "env.0.0")["WORLD_SIZE"], "1");
}

TEST(Gpu, CudaVisibleDevicesHidingEveryGpuIsAClearError) {
  ASSERT_GT(NvidiaSmiGpuCount(), 0);
  TempDir dir;
  ProcessResult r = RunProcess(DdprunWithTestWorker({"--nproc-per-node=gpu"}, {"env", dir.path()}),
                               {{"CUDA_VISIBLE_DEVICES", ""}});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, ::testing::HasSubstr("--nproc-per-node=gpu: no GPU is visible on this node"));
  EXPECT_THAT(r.err, ::testing::HasSubstr("CUDA_VISIBLE_DEVICES"));
  EXPECT_FALSE(FileExists(dir / "env.0.0"));
}

TEST(Gpu, AutoPrefersGpusOverCpus) {
  const int gpus = NvidiaSmiGpuCount();
  ASSERT_GT(gpus, 0);
  TempDir dir;
  ProcessResult r = RunProcess(DdprunWithTestWorker({"--nproc-per-node=auto"}, {"env", dir.path()}),
                               {{"CUDA_VISIBLE_DEVICES", std::nullopt}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseEnvFile(dir / "env.0.0")["WORLD_SIZE"], std::to_string(gpus));
}

// The CPUs of GPU 0's NUMA node that this process may use, from sysfs as torch reads them;
// empty when the firmware does not say (numa_node -1).
std::string Gpu0NodeCpus() {
  ProcessResult smi = RunProcess(
      {"/bin/sh", "-c", "nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -n 1"},
      {{"CUDA_VISIBLE_DEVICES", std::nullopt}});
  std::string bus = smi.out.substr(0, smi.out.find('\n'));  // 00000000:07:00.0
  for (char& c : bus) c = static_cast<char>(std::tolower(c));
  if (bus.size() > 12) bus = bus.substr(bus.size() - 12);  // 0000:07:00.0, as sysfs names it
  const std::string node = ReadFile("/sys/bus/pci/devices/" + bus + "/numa_node");
  if (node.empty() || node[0] == '-') return "";
  ProcessResult cpus =
      RunProcess({"/usr/bin/python3", "-c",
                  "import os,sys\n"
                  "def parse(s):\n"
                  "  out=set()\n"
                  "  for p in s.strip().split(','):\n"
                  "    a,_,b=p.partition('-'); out.update(range(int(a),int(b or a)+1))\n"
                  "  return out\n"
                  "c=sorted(parse(open(sys.argv[1]).read()) & os.sched_getaffinity(0))\n"
                  "print(','.join(map(str,c)))",
                  "/sys/devices/system/node/node" + node.substr(0, node.find('\n')) + "/cpulist"});
  return cpus.out.substr(0, cpus.out.find('\n'));
}

TEST(Gpu, NumaBindingNodeBindsTheWorkerToItsGpusNode) {
  ASSERT_GT(NvidiaSmiGpuCount(), 0);
  const std::string expected = Gpu0NodeCpus();
  if (expected.empty()) GTEST_SKIP() << "GPU 0's NUMA node is not known (numa_node -1)";
  ProcessResult r =
      RunProcess({kDdprun, "--standalone", "--nproc-per-node=1", "--numa-binding=node", "--tee=3",
                  "--no-python", "/usr/bin/python3", "-c",
                  "import os; print('cpus', ','.join(map(str, sorted(os.sched_getaffinity(0)))))"},
                 {{"CUDA_VISIBLE_DEVICES", "0"}, {"LOGLEVEL", "INFO"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("cpus " + expected + "\n")) << r.err;
  EXPECT_THAT(r.err, ::testing::HasSubstr("(accelerator 0000:")) << "the GPU's PCI address";
}

TEST(Gpu, VirtualLocalRankShowsEachWorkerItsOwnGpu) {
  ASSERT_GT(NvidiaSmiGpuCount(), 0);
  TempDir dir;
  ProcessResult r = RunProcess(
      DdprunWithTestWorker({"--nproc-per-node=gpu", "--virtual-local-rank"}, {"env", dir.path()}),
      {{"CUDA_VISIBLE_DEVICES", std::nullopt}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int gpus = NvidiaSmiGpuCount();
  for (int rank = 0; rank < gpus; ++rank) {
    auto env = ParseEnvFile(dir / ("env." + std::to_string(rank) + ".0"));
    EXPECT_EQ(env["LOCAL_RANK"], "0");
    EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], std::to_string(rank));
  }
}

TEST(Gpu, AgentDoesNotLinkCuda) {
  ProcessResult r = RunProcess({"/usr/bin/ldd", kDdprun});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, ::testing::Not(::testing::HasSubstr("libcuda")));
  EXPECT_THAT(r.out, ::testing::Not(::testing::HasSubstr("libcudart")));
  EXPECT_THAT(r.out, ::testing::Not(::testing::HasSubstr("libnccl")));
}

}  // namespace
}  // namespace ddprun::testing
