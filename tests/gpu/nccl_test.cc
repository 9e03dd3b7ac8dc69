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
  ASSERT_EQ(cudaMemcpy(buf, host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const ncclResult_t r = ncclAllReduce(buf, buf, kCount, ncclFloat, ncclSum, comm.get(), stream);
  ASSERT_TRUE(r == ncclSuccess || r == ncclInProgress) << ncclGetErrorString(r);
  ASSERT_TRUE(comm.Synchronize(stream, absl::Seconds(60)).ok());
  ASSERT_EQ(cudaMemcpy(host.data(), buf, kCount * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
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
  std::printf("[ measure ] InitNccl on 1 rank: %.1f ms\n",
              absl::ToDoubleMilliseconds(absl::Now() - start));
  std::fflush(stdout);
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

// A stream held by a host function until Open(): work queued behind it cannot finish, as a
// collective waiting for a dead or stuck peer cannot. On every way out of a test the gate
// opens and the stream drains before either goes.
class HeldStream {
 public:
  HeldStream() {
    EXPECT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    EXPECT_EQ(cudaLaunchHostFunc(stream_, &HeldStream::Wait, this), cudaSuccess);
  }
  ~HeldStream() {
    Open();
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  cudaStream_t get() const { return stream_; }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    opened_.notify_all();
  }

 private:
  static void CUDART_CB Wait(void* held) {
    auto* h = static_cast<HeldStream*>(held);
    std::unique_lock<std::mutex> lock(h->mu_);
    h->opened_.wait(lock, [h] { return h->open_; });
  }

  cudaStream_t stream_ = nullptr;
  std::mutex mu_;
  std::condition_variable opened_;
  bool open_ = false;
};

std::atomic<int> g_sigterms{0};
void CountSigterm(int) { ++g_sigterms; }

// SIGTERM counted instead of ending the test program; the action that was there comes back
// on every way out.
class CountedSigterm {
 public:
  CountedSigterm() {
    struct sigaction counting {};
    counting.sa_handler = &CountSigterm;
    sigemptyset(&counting.sa_mask);
    g_sigterms = 0;
    EXPECT_EQ(::sigaction(SIGTERM, &counting, &saved_), 0);
  }
  ~CountedSigterm() { ::sigaction(SIGTERM, &saved_, nullptr); }

 private:
  struct sigaction saved_ {};
};

// The agent's stop signal at the end of a round reaches a worker whose collective hangs: the
// watchdog aborts the communicator, then SIGTERM goes on to the handler that was there.
TEST(GpuNccl, WatchdogAbortsAHungCollectiveOnSigterm) {
  CountedSigterm sigterm;  // installed before InitNccl: the handler the watchdog passes on to
  Context ctx = RankZero();
  absl::StatusOr<NcclCommunicator> world = ctx.InitNccl();  // abort_on_sigterm by default
  ASSERT_TRUE(world.ok()) << world.status();
  constexpr size_t kCount = 1 << 20;
  float* send = nullptr;
  float* recv = nullptr;
  ASSERT_EQ(cudaMalloc(&send, kCount * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&recv, kCount * sizeof(float)), cudaSuccess);
  {
    HeldStream held;
    // Out of place, so that even on one rank NCCL queues work (a copy) behind the gate.
    const ncclResult_t r =
        ncclAllReduce(send, recv, kCount, ncclFloat, ncclSum, world->get(), held.get());
    ASSERT_TRUE(r == ncclSuccess || r == ncclInProgress) << ncclGetErrorString(r);
    ASSERT_TRUE(world->WaitReady(absl::Seconds(30)).ok());
    EXPECT_EQ(cudaStreamQuery(held.get()), cudaErrorNotReady) << "the collective was not held";

    const absl::Time sent = absl::Now();
    ASSERT_EQ(::raise(SIGTERM), 0);
    const bool aborted =
        ddprun::testing::WaitUntil([&] { return world->aborted(); }, absl::Seconds(30));
    held.Open();  // an abort that waits for the device can now finish
    ASSERT_TRUE(aborted) << "the watchdog did not abort the communicator within 30 s of SIGTERM";
    std::printf("[ measure ] SIGTERM to an aborted communicator (collective held): %.1f ms\n",
                absl::ToDoubleMilliseconds(absl::Now() - sent));
    EXPECT_TRUE(
        ddprun::testing::WaitUntil([] { return g_sigterms.load() >= 1; }, absl::Seconds(30)))
        << "SIGTERM did not go on to the handler installed before InitNccl";
    std::printf("[ measure ] SIGTERM passed on to the previous handler after: %.1f ms\n",
                absl::ToDoubleMilliseconds(absl::Now() - sent));
    std::fflush(stdout);
    absl::Status done = world->Synchronize(held.get(), absl::Seconds(30));
    EXPECT_EQ(done.code(), absl::StatusCode::kCancelled) << done;
    EXPECT_THAT(done.message(), HasSubstr("was aborted: signal 15 arrived"));
    EXPECT_EQ(world->get(), nullptr);
  }
  cudaFree(send);
  cudaFree(recv);
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
  std::fflush(stdout);
  EXPECT_LT(took, absl::Seconds(20));
}

TEST(GpuNccl, DdpAllreduceUnderDdprunFrom8BTo1GiB) {
  ddprun::testing::ProcessResult r = ddprun::testing::RunProcess(
      {ddprun::testing::kDdprun, "--standalone", "--nproc-per-node=gpu", "--no-python",
       kDdpAllreduce, "--iters", "10"},
      {}, absl::Seconds(150));  // inside tests/gpu/run.sh's limit, so that the output is kept
  std::printf("%s", r.out.c_str());
  std::fflush(stdout);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# Avg bus bandwidth"));
  EXPECT_THAT(r.out, HasSubstr("  1073741824     268435456     float"));
  EXPECT_THAT(r.out, HasSubstr("# Out of bounds values : 0 OK"));
  EXPECT_THAT(r.out, HasSubstr("every element of every size verified on every rank"));
}

// Node health on a real GPU node (docs/node-health.md): the built-in check finds NVML and a
// healthy GPU, and both example checks pass; the job then runs.
TEST(NodeHealthOnAGpu, TheBuiltinAndTheExampleChecksPassOnAHealthyNode) {
  const std::string examples = ddprun::testing::kSourceDir + "/examples/health-checks/";
  ddprun::testing::ProcessResult ecc =
      ddprun::testing::RunProcess({"/bin/sh", examples + "gpu-ecc.sh"});
  EXPECT_EQ(ecc.exit_code, 0) << ecc.err;
  ddprun::testing::ProcessResult r = ddprun::testing::RunProcess(
      {ddprun::testing::kDdprun, "--nproc-per-node=gpu", "--health-check-timeout=180",
       "--health-check=builtin," + examples + "nccl-allreduce.sh", "--no-python", "/bin/true"},
      {{"DDPRUN", ddprun::testing::kDdprun},
       {"DDP_ALLREDUCE", kDdpAllreduce},
       {"ALLREDUCE_MAX_BYTES", "16777216"}},
      absl::Seconds(240));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("health check failed")));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("skipped: NVML")));  // the driver's NVML is there
}

}  // namespace
}  // namespace ddp::worker
