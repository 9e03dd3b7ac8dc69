// On a machine with an NVIDIA GPU: the SDK's NCCL communicators for real. One rank per
// test (a GPU machine here has one GPU), through the store rank 0 serves. Label `gpu`.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ddp/worker/context.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddp::worker {
namespace {

using ::testing::HasSubstr;

Context OneRank() {
  Environment env;
  env.master_addr = "127.0.0.1";
  env.master_port = ddprun::testing::FreeLoopbackPort();
  env.run_id = "gpu-test";
  absl::StatusOr<Context> ctx = Context::Create(env);
  EXPECT_TRUE(ctx.ok()) << ctx.status();
  return std::move(*ctx);
}

// Sums `value` over the communicator's ranks and checks every element.
void ExpectAllReduceSums(NcclCommunicator& comm, float value) {
  constexpr size_t kCount = 1 << 20;
  float* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, kCount * sizeof(float)), cudaSuccess);
  std::vector<float> host(kCount, value);
  ASSERT_EQ(cudaMemcpy(buf, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const ncclResult_t r = ncclAllReduce(buf, buf, kCount, ncclFloat, ncclSum, comm.get(), stream);
  ASSERT_TRUE(r == ncclSuccess || r == ncclInProgress) << ncclGetErrorString(r);
  ASSERT_TRUE(comm.Synchronize(stream, absl::Seconds(60)).ok());
  ASSERT_EQ(cudaMemcpy(host.data(), buf, kCount * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  size_t wrong = 0;
  for (float v : host) wrong += v != value * comm.size();
  EXPECT_EQ(wrong, 0u);
  cudaStreamDestroy(stream);
  cudaFree(buf);
}

TEST(GpuNccl, InitNcclAndAllReduceOnOneRank) {
  Context ctx = OneRank();
  const absl::Time start = absl::Now();
  absl::StatusOr<NcclCommunicator> world = ctx.InitNccl();
  ASSERT_TRUE(world.ok()) << world.status();
  std::printf("[ measure ] InitNccl on 1 rank: %.1f ms\n", absl::ToDoubleMilliseconds(absl::Now() - start));
  EXPECT_EQ(world->size(), 1);
  EXPECT_EQ(world->device(), 0);
  EXPECT_TRUE(world->AsyncError().ok());
  ExpectAllReduceSums(*world, 3.0f);
}

TEST(GpuNccl, SeveralNamedCommunicators) {
  Context ctx = OneRank();
  std::vector<NcclCommunicator> comms;
  for (const char* name : {"world", "tensor", "data"}) {
    absl::StatusOr<NcclCommunicator> comm = ctx.InitNccl(name);
    ASSERT_TRUE(comm.ok()) << comm.status();
    EXPECT_EQ(comm->name(), name);
    comms.push_back(std::move(*comm));
  }
  for (auto& comm : comms) ExpectAllReduceSums(comm, 2.0f);
}

TEST(GpuNccl, ScalableInitForcedOnWithASmallThreshold) {
  Context ctx = OneRank();
  NcclOptions options;
  options.scalable_threshold = 0;  // ncclCommInitRankScalable even for one rank
  options.ranks_per_root = 1;
  absl::StatusOr<NcclCommunicator> comm = ctx.InitNccl("scalable", options);
  ASSERT_TRUE(comm.ok()) << comm.status();
  ExpectAllReduceSums(*comm, 5.0f);
}

TEST(GpuNccl, SplitAndAbort) {
  Context ctx = OneRank();
  absl::StatusOr<NcclCommunicator> world = ctx.InitNccl();
  ASSERT_TRUE(world.ok()) << world.status();
  absl::StatusOr<NcclCommunicator> part = world->Split(/*color=*/0, /*key=*/0, "part");
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->size(), 1);
  ExpectAllReduceSums(*part, 1.0f);
  part->Abort("test");
  EXPECT_TRUE(part->aborted());
  EXPECT_EQ(part->get(), nullptr);
  EXPECT_FALSE(part->AsyncError().ok());
}

TEST(GpuNccl, DdpAllreduceUnderDdprunReportsBusBandwidth) {
  ddprun::testing::ProcessResult r = ddprun::testing::RunProcess(
      {ddprun::testing::kDdprun, "--standalone", "--nproc-per-node=gpu", "--no-python",
       DDP_ALLREDUCE_BIN, "--iters", "10"},
      {}, absl::Seconds(300));
  std::printf("%s", r.out.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("busbw"));
  EXPECT_THAT(r.out, HasSubstr("every element of every size verified on every rank"));
}

}  // namespace
}  // namespace ddp::worker
