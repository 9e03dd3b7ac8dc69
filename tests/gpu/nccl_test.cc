// On a machine with an NVIDIA GPU: the SDK's NCCL communicators for real. One rank per
// test (a GPU machine here has one GPU), through the store rank 0 serves. Label `gpu`.

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ddp/worker/context.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddp::worker {
namespace {

using ::testing::HasSubstr;

const std::string kDdpAllreduce = ddprun::testing::BuiltOrBundled(DDP_ALLREDUCE_BIN);

// Rank 0 of `world_size`, serving the store itself.
Context RankZero(int world_size = 1) {
  Environment env;
  env.world_size = world_size;
  env.local_world_size = world_size;
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
  Context ctx = RankZero();
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
  Context ctx = RankZero();
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
  Context ctx = RankZero();
  NcclOptions options;
  options.scalable_threshold = 0;  // ncclCommInitRankScalable even for one rank
  options.ranks_per_root = 1;
  absl::StatusOr<NcclCommunicator> comm = ctx.InitNccl("scalable", options);
  ASSERT_TRUE(comm.ok()) << comm.status();
  ExpectAllReduceSums(*comm, 5.0f);
}

TEST(GpuNccl, SplitAndAbort) {
  Context ctx = RankZero();
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

// A stream held by a host function until the test opens the gate: a collective queued
// behind it cannot finish, as one waiting for a dead or stuck peer cannot.
struct StreamGate {
  std::mutex mu;
  std::condition_variable opened;
  bool open = false;

  static void CUDART_CB Wait(void* gate) {
    auto* g = static_cast<StreamGate*>(gate);
    std::unique_lock<std::mutex> lock(g->mu);
    g->opened.wait(lock, [g] { return g->open; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    opened.notify_all();
  }
};

std::atomic<int> g_sigterms{0};
void CountSigterm(int) { ++g_sigterms; }

// The agent's stop signal at the end of a round reaches a worker whose collective hangs: the
// watchdog aborts the communicator, then SIGTERM goes on to the handler that was there.
TEST(GpuNccl, WatchdogAbortsAHungCollectiveOnSigterm) {
  struct sigaction counting {};
  counting.sa_handler = &CountSigterm;
  sigemptyset(&counting.sa_mask);
  struct sigaction saved {};
  ASSERT_EQ(::sigaction(SIGTERM, &counting, &saved), 0);  // else SIGTERM would end the test
  g_sigterms = 0;
  {
    Context ctx = RankZero();
    absl::StatusOr<NcclCommunicator> world = ctx.InitNccl();  // abort_on_sigterm by default
    ASSERT_TRUE(world.ok()) << world.status();
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    constexpr size_t kCount = 1 << 20;
    float* buf = nullptr;
    ASSERT_EQ(cudaMalloc(&buf, kCount * sizeof(float)), cudaSuccess);
    StreamGate gate;
    ASSERT_EQ(cudaLaunchHostFunc(stream, &StreamGate::Wait, &gate), cudaSuccess);
    const ncclResult_t r = ncclAllReduce(buf, buf, kCount, ncclFloat, ncclSum, world->get(), stream);
    ASSERT_TRUE(r == ncclSuccess || r == ncclInProgress) << ncclGetErrorString(r);
    ASSERT_TRUE(world->WaitReady(absl::Seconds(30)).ok());
    EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady) << "the collective was not held";

    const absl::Time sent = absl::Now();
    ASSERT_EQ(::raise(SIGTERM), 0);
    const bool aborted = ddprun::testing::WaitUntil([&] { return world->aborted(); }, absl::Seconds(30));
    std::printf("[ measure ] SIGTERM to an aborted communicator (collective hung): %.1f ms\n",
                absl::ToDoubleMilliseconds(absl::Now() - sent));
    gate.Open();  // whatever happens, let the stream drain before its memory goes
    ASSERT_TRUE(aborted) << "the watchdog did not abort the communicator within 30 s of SIGTERM";
    EXPECT_TRUE(ddprun::testing::WaitUntil([] { return g_sigterms.load() >= 1; }, absl::Seconds(30)))
        << "SIGTERM did not go on to the handler installed before InitNccl";
    std::printf("[ measure ] SIGTERM passed on to the previous handler after: %.1f ms\n",
                absl::ToDoubleMilliseconds(absl::Now() - sent));
    absl::Status done = world->Synchronize(stream, absl::Seconds(30));
    EXPECT_EQ(done.code(), absl::StatusCode::kCancelled) << done;
    EXPECT_THAT(done.message(), HasSubstr("was aborted: signal 15 arrived"));
    EXPECT_EQ(world->get(), nullptr);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaFree(buf);
    cudaStreamDestroy(stream);
  }
  ::sigaction(SIGTERM, &saved, nullptr);
}

// A peer that never comes: InitNccl ends at its deadline, with the communicator aborted,
// instead of waiting in NCCL's bootstrap for ever.
TEST(GpuNccl, InitWithAPeerThatNeverComesEndsAtItsDeadline) {
  Context ctx = RankZero(/*world_size=*/2);
  NcclOptions options;
  options.timeout = absl::Seconds(5);
  const absl::Time start = absl::Now();
  absl::StatusOr<NcclCommunicator> comm = ctx.InitNccl("alone", options);
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(comm.ok());
  ASSERT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  EXPECT_THAT(comm.status().message(), HasSubstr("NCCL init of communicator 'alone' (2 ranks)"));
  std::printf("[ measure ] InitNccl with a missing peer gave up after %.1f ms (deadline 5 s)\n",
              absl::ToDoubleMilliseconds(took));
  EXPECT_LT(took, absl::Seconds(20));
}

TEST(GpuNccl, DdpAllreduceUnderDdprunFrom8BTo1GiB) {
  ddprun::testing::ProcessResult r = ddprun::testing::RunProcess(
      {ddprun::testing::kDdprun, "--standalone", "--nproc-per-node=gpu", "--no-python",
       kDdpAllreduce, "--iters", "10"},
      {}, absl::Seconds(300));
  std::printf("%s", r.out.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# Avg bus bandwidth"));
  EXPECT_THAT(r.out, HasSubstr("  1073741824     268435456     float"));
  EXPECT_THAT(r.out, HasSubstr("# Out of bounds values : 0 OK"));
  EXPECT_THAT(r.out, HasSubstr("every element of every size verified on every rank"));
}

}  // namespace
}  // namespace ddp::worker
