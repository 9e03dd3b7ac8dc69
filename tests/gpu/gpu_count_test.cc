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

TEST(Gpu, AgentDoesNotLinkCuda) {
  ProcessResult r = RunProcess({"/usr/bin/ldd", kDdprun});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, ::testing::Not(::testing::HasSubstr("libcuda")));
  EXPECT_THAT(r.out, ::testing::Not(::testing::HasSubstr("libcudart")));
  EXPECT_THAT(r.out, ::testing::Not(::testing::HasSubstr("libnccl")));
}

}  // namespace
}  // namespace ddprun::testing
