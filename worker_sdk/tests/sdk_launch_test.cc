// The SDK in workers launched by ddprun: store collectives on one node (the store of rank 0)
// and on two nodes (the master's store), the C API, the no-GPU errors of InitNccl and
// ddp-allreduce, and a project built against the installed SDK.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "ddp/worker/config.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_certificates.h"

#if DDP_WORKER_HAS_NCCL
#include <cuda_runtime_api.h>
#endif

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kDdprun = DDPRUN_BIN;
const std::string kSdkWorker = SDK_TEST_WORKER_BIN;
const std::string kCmake = CMAKE_BIN;

std::vector<std::string> Ddprun(std::vector<std::string> options,
                                const std::vector<std::string>& worker) {
  std::vector<std::string> argv = {kDdprun};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back("--no-python");
  argv.insert(argv.end(), worker.begin(), worker.end());
  return argv;
}

void ExpectCollectivesRan(const TempDir& dir, int world, const std::string& store) {
  for (int rank = 0; rank < world; ++rank) {
    SCOPED_TRACE(rank);
    const std::string out = ReadFile(dir / absl::StrCat("sdk.", rank));
    EXPECT_THAT(out, HasSubstr(absl::StrCat("world=", world, "\n")));
    EXPECT_THAT(out, HasSubstr(absl::StrCat("broadcast=hello from rank ", world - 1, "\n")));
    std::string all;
    for (int r = 0; r < world; ++r) all += absl::StrCat(r == 0 ? "" : ",", r);
    EXPECT_THAT(out, HasSubstr("all_gather=" + all + "\n"));
    EXPECT_THAT(out, HasSubstr("store=" + store));
  }
}

TEST(SdkLaunch, EightRanksOnOneNodeUseTheStoreRankZeroServes) {
  TempDir dir;
  ProcessResult r = RunProcess(
      Ddprun({"--standalone", "--nproc-per-node=8"}, {kSdkWorker, "collectives", dir.path()}), {},
      absl::Seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectCollectivesRan(dir, 8, "localhost:");  // MASTER_ADDR:MASTER_PORT, as torchrun sets them
}

// Two agents on 127.0.0.1 and .2 (the first hosts the master) run the collectives worker
// with `nproc` ranks each; `conf` is added to --rdzv-conf. Both must exit 0.
void RunTwoNodesOfCollectives(const TempDir& dir, int port, int nproc, const std::string& conf) {
  auto node = [&](int n) {
    return Ddprun({"--nnodes=2", absl::StrCat("--nproc-per-node=", nproc), "--rdzv-backend=c10d",
                   absl::StrCat("--rdzv-endpoint=127.0.0.1:", port), "--rdzv-id=sdk",
                   absl::StrCat("--local-addr=127.0.0.", n),
                   absl::StrCat("--rdzv-conf=is_host=", n == 1 ? 1 : 0, conf)},
                  {kSdkWorker, "collectives", dir.path()});
  };
  auto a = ChildProcess::Start(node(1));
  auto b = ChildProcess::Start(node(2));
  ProcessResult ra = a->Wait(absl::Seconds(60));
  ProcessResult rb = b->Wait(absl::Seconds(60));
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
}

TEST(SdkLaunch, TwoNodesOfFourUseTheMastersStore) {
  TempDir dir;
  const int port = FreeLoopbackPort();
  RunTwoNodesOfCollectives(dir, port, 4, "");
  ExpectCollectivesRan(dir, 8, absl::StrCat("127.0.0.1:", port, "\n"));
}

// With TLS between agents and master, workers reach the master's Store over TLS too, with
// the files ddprun passes on (DDPRUN_TLS_CERT, _KEY, _CA).
TEST(SdkLaunch, OverTlsWorkersReachTheMastersStoreToo) {
  TempDir dir;
  ASSERT_TRUE(MakeTestCertificates(dir).ok());
  const int port = FreeLoopbackPort();
  RunTwoNodesOfCollectives(dir, port, 2,
                           absl::StrCat(",tls_cert=", dir / "node.pem",
                                        ",tls_key=", dir / "node.key", ",tls_ca=", dir / "ca.pem"));
  ExpectCollectivesRan(dir, 4, absl::StrCat("127.0.0.1:", port, "\n"));
}

// With a token, every Store call of every worker carries it (the master refuses calls
// without it): the collectives pass only if the SDK found it in DDPRUN_STORE_TOKEN_FILE.
TEST(SdkLaunch, WithATokenWorkersShowItOnEveryStoreCall) {
  TempDir dir;
  WriteFile(dir / "token", "s3cret\n", 0600);
  const int port = FreeLoopbackPort();
  RunTwoNodesOfCollectives(dir, port, 2, absl::StrCat(",token_file=", dir / "token"));
  ExpectCollectivesRan(dir, 4, absl::StrCat("127.0.0.1:", port, "\n"));
}

TEST(SdkLaunch, TheCApiFromAProgramWrittenInC) {
  ProcessResult r = RunProcess(Ddprun({"--standalone", "--nproc-per-node=2"}, {SDK_C_WORKER_BIN}),
                               {}, absl::Seconds(60));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("c worker: rank 0 of 2 (local 0 of 2)"));
  EXPECT_THAT(r.out, HasSubstr("c worker: rank 1 of 2 (local 1 of 2)"));
}

TEST(SdkLaunch, HeartbeatsKeepAWorkerAliveUnderTheHeartbeatTimeout) {
  // 4 s of work, beating every 20 ms, under a 2 s timeout (the clock starts at the worker's
  // start, and a sanitizer build starts slowly): never taken for hung.
  ProcessResult r =
      RunProcess(Ddprun({"--standalone", "--nproc-per-node=2", "--worker-heartbeat-timeout=2"},
                        {kSdkWorker, "heartbeat", "x"}),
                 {}, absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("taking it for hung")));
}

TEST(SdkLaunch, OutsideALauncherTheErrorNamesTheMissingVariable) {
  ProcessResult r =
      RunProcess({kSdkWorker, "collectives", "/tmp"},
                 {{"RANK", std::nullopt}, {"WORLD_SIZE", std::nullopt}}, absl::Seconds(20));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("WORLD_SIZE is not set"));
}

#if DDP_WORKER_HAS_NCCL
bool GpuVisible() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

TEST(SdkLaunch, WithoutAGpuInitNcclFailsWithOneClearLine) {
  if (GpuVisible()) GTEST_SKIP() << "a GPU is visible: tests/gpu covers InitNccl";
  ProcessResult r = RunProcess(Ddprun({"--standalone", "--nproc-per-node=2"}, {kSdkWorker, "nccl"}),
                               {}, absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("sdk_test_worker: no CUDA device visible: "));
  EXPECT_THAT(r.err, HasSubstr("CUDA_VISIBLE_DEVICES"));
}

TEST(SdkLaunch, WithoutAGpuDdpAllreduceExitsNonZeroWithOneClearLine) {
  if (GpuVisible()) GTEST_SKIP() << "a GPU is visible: tests/gpu runs ddp-allreduce";
  ProcessResult r = RunProcess(Ddprun({"--standalone", "--nproc-per-node=1"}, {DDP_ALLREDUCE_BIN}),
                               {}, absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.err;  // an exit, not a signal: no crash
  EXPECT_THAT(r.err, HasSubstr("ddp-allreduce: no CUDA device visible: "));
  EXPECT_THAT(r.err, Not(HasSubstr("terminate")));
}
#endif

// `cmake --install`, then a project of its own finds the SDK with find_package(ddprun) and
// another is compiled with pkg-config; both run under ddprun.
TEST(SdkInstall, ExternalProjectsBuildAgainstTheInstalledSdk) {
#ifdef DDPRUN_SANITIZED
  GTEST_SKIP()
      << "an ASan-built SDK needs consumers built with ASan too; the plain build tests this";
#endif
  TempDir dir;
  const std::string prefix = dir / "prefix";
  ProcessResult install = RunProcess({kCmake, "--install", DDPRUN_BINARY_DIR, "--prefix", prefix},
                                     {}, absl::Seconds(120));
  ASSERT_EQ(install.exit_code, 0) << install.out << install.err;
  for (const char* installed :
       {"/include/ddp/worker/context.h", "/include/ddp_worker.h", "/include/ddp/worker/config.h",
        "/lib/libddp_worker.so", "/lib/cmake/ddprun/ddprunConfig.cmake",
        "/lib/pkgconfig/ddp-worker.pc", "/bin/ddprun", "/bin/ddprun-master",
        "/lib/ddprun/libddprun_network.so"}) {
    EXPECT_TRUE(FileExists(prefix + installed)) << installed;
  }

  const std::string build = dir / "consumer-build";
  ProcessResult configure =
      RunProcess({kCmake, "-S", SDK_CONSUMER_DIR, "-B", build, "-DCMAKE_PREFIX_PATH=" + prefix,
                  "-DCMAKE_BUILD_TYPE=Release"},
                 {}, absl::Seconds(180));
  ASSERT_EQ(configure.exit_code, 0) << configure.out << configure.err;
  ProcessResult compile = RunProcess({kCmake, "--build", build}, {}, absl::Seconds(300));
  ASSERT_EQ(compile.exit_code, 0) << compile.out << compile.err;
  ProcessResult run = RunProcess(
      Ddprun({"--standalone", "--nproc-per-node=2"}, {build + "/consumer"}), {}, absl::Seconds(60));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("consumer rank 1 of 2: agreed (sdk "));

  // pkg-config: the flags alone build it.
  const std::string binary = dir / "consumer-pc";
  ProcessResult pc =
      RunProcess({"/bin/sh", "-c",
                  absl::StrCat("c++ -std=c++17 ", SDK_CONSUMER_DIR, "/main.cc -o ", binary,
                               " $(pkg-config --cflags --libs ddp-worker)")},
                 {{"PKG_CONFIG_PATH", prefix + "/lib/pkgconfig"}}, absl::Seconds(300));
  ASSERT_EQ(pc.exit_code, 0) << pc.out << pc.err;
  ProcessResult run_pc = RunProcess(Ddprun({"--standalone", "--nproc-per-node=2"}, {binary}),
                                    {{"LD_LIBRARY_PATH", prefix + "/lib"}}, absl::Seconds(60));
  ASSERT_EQ(run_pc.exit_code, 0) << run_pc.err;
  EXPECT_THAT(run_pc.out, HasSubstr("consumer rank 0 of 2: agreed"));
}

}  // namespace
}  // namespace ddprun::testing
