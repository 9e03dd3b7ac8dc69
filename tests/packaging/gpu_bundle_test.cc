// The GPU bundle (scripts/gpu-bundle.sh) on a machine that has glibc and nothing else of
// ours: packed from this build into a root file system that holds Debian's libc6 alone
// (libc_root.sh), and run there: ddprun --version, a one-node job, multi-node jobs (an
// agent hosting the master, and ddprun-master), and the programs that need CUDA's runtime
// and NCCL, which find them only in a folder of their own, as on the GPU machine. Then
// tests/gpu/run.sh --bundle itself, dry, in another distribution with PyTorch and NVIDIA's
// libraries laid out as their wheels are, and no GPU. Root only (chroot, namespaces): label
// `netns`, with the other root-only tests.

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kBundleScript = kSourceDir + "/scripts/gpu-bundle.sh";
const std::string kLibcRoot = kSourceDir + "/tests/packaging/libc_root.sh";
// The bundle inside the root, and where the workers write.
constexpr char kBundle[] = "/bundle";
constexpr char kOut[] = "/tmp/out";

class GpuBundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef DDPRUN_SANITIZED
    GTEST_SKIP()
        << "the bundle is made from the plain build; an ASan build's would carry the ASan runtime";
#endif
    ASSERT_EQ(::geteuid(), 0) << "chroot and namespaces need root (label netns)";
    ProcessResult root =
        RunProcess({"/bin/bash", kLibcRoot, "make", root_.path()}, {}, absl::Seconds(60));
    ASSERT_EQ(root.exit_code, 0) << root.err;
    ProcessResult made = RunProcess(
        {"/bin/bash", kBundleScript, "--build-dir", BUILD_DIR, "--no-build", root_ / "bundle"}, {},
        absl::Seconds(120));
    ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
    summary_ = made.out;
    ASSERT_EQ(RunProcess({"/bin/mkdir", "-p", root_.path() + kOut}).exit_code, 0);
  }

  // `argv` run chrooted in the root, with this process's environment plus `env`.
  ProcessResult RunInRoot(std::vector<std::string> argv,
                          const std::map<std::string, std::optional<std::string>>& env = {},
                          absl::Duration timeout = absl::Seconds(60)) const {
    return RunProcess(InRoot(std::move(argv)), env, timeout);
  }
  std::vector<std::string> InRoot(std::vector<std::string> argv) const {
    argv.insert(argv.begin(), {"/bin/bash", kLibcRoot, "run", root_.path()});
    return argv;
  }
  std::string Bundled(const std::string& program) const {
    return absl::StrCat(kBundle, "/bin/", program);
  }
  // ddprun from the bundle running test_worker from the bundle, which writes its environment.
  std::vector<std::string> DdprunEnvJob(std::vector<std::string> options) const {
    std::vector<std::string> argv = {Bundled("ddprun")};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {"--no-python", Bundled("test_worker"), "env", kOut});
    return argv;
  }
  // The WORLD_SIZE every rank of a `world`-rank job wrote.
  void ExpectRanksWrote(int world) const {
    for (int rank = 0; rank < world; ++rank) {
      std::map<std::string, std::string> env =
          ParseEnvFile(absl::StrCat(root_.path(), kOut, "/env.", rank, ".0"));
      EXPECT_EQ(env["WORLD_SIZE"], std::to_string(world)) << "rank " << rank;
    }
  }

  TempDir root_;
  std::string summary_;
};

TEST_F(GpuBundleTest, HoldsEveryLibraryButGlibcAndCudasAndFitsTheCarryLimit) {
  std::printf("[ measure ] %s", summary_.c_str());
  EXPECT_THAT(summary_, HasSubstr("the GPU machine needs glibc 2."));
  EXPECT_THAT(summary_, HasSubstr("libcudart.so."));
  EXPECT_THAT(summary_, HasSubstr("libnccl.so.2"));
  const std::string lib = root_ / "bundle/lib/";
  for (const char* bundled :
       {"libgrpc++.so.1.51", "libprotobuf.so.32", "libabsl_strings.so.20220623",
        "libspdlog.so.1.10", "libfmt.so.9", "libcares.so.2", "libre2.so.9", "libstdc++.so.6",
        "libddp_worker.so.0", "ddprun/libddprun_network.so"}) {
    EXPECT_TRUE(FileExists(lib + bundled)) << bundled;
  }
  ProcessResult listing = RunProcess({"/bin/ls", lib});
  EXPECT_THAT(listing.out, Not(HasSubstr("libc.so")));
  EXPECT_THAT(listing.out, Not(HasSubstr("libcudart")));
  EXPECT_THAT(listing.out, Not(HasSubstr("libnccl")));
  EXPECT_THAT(ReadFile(root_ / "bundle/MANIFEST"), HasSubstr("lib/libgrpc++.so.1.51 <- "));
  // The device machine takes 64 MiB with the working tree; the bundle must leave room.
  ProcessResult du = RunProcess({"/usr/bin/du", "-sm", root_ / "bundle"});
  int mib = 0;
  ASSERT_TRUE(absl::SimpleAtoi(std::vector<std::string>(absl::StrSplit(du.out, '\t'))[0], &mib))
      << du.out;
  EXPECT_LT(mib, 48);
}

TEST_F(GpuBundleTest, RunsWhereGlibcIsAllThereIs) {
  // The root is as bare as promised: a program of this build, unbundled, cannot start there.
  ASSERT_EQ(RunProcess({"/bin/cp", kDdprun, root_ / "unbundled-ddprun"}).exit_code, 0);
  ProcessResult unbundled = RunInRoot({"/unbundled-ddprun", "--version"});
  EXPECT_NE(unbundled.exit_code, 0);
  EXPECT_THAT(unbundled.err, HasSubstr("error while loading shared libraries"));

  ProcessResult version = RunInRoot({Bundled("ddprun"), "--version"});
  EXPECT_EQ(version.exit_code, 0) << version.err;
  EXPECT_THAT(version.out, HasSubstr("ddprun "));
  ProcessResult master = RunInRoot({Bundled("ddprun-master"), "--help"});
  EXPECT_EQ(master.exit_code, 0) << master.err;
  EXPECT_THAT(master.out, HasSubstr("--port"));
}

TEST_F(GpuBundleTest, OneNodeJob) {
  ProcessResult r = RunInRoot(DdprunEnvJob({"--standalone", "--nproc-per-node=2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectRanksWrote(2);
}

// Two agents as users start them (c10d), one of them hosting the master, which needs the
// network plugin from lib/ddprun.
TEST_F(GpuBundleTest, MultiNodeJobWithAnAgentHostingTheMaster) {
  const std::string endpoint = absl::StrCat("127.0.0.1:", FreeLoopbackPort());
  const std::vector<std::string> options = {"--nnodes=2", "--nproc-per-node=2",
                                            "--rdzv-backend=c10d", "--rdzv-endpoint=" + endpoint,
                                            "--rdzv-id=bundle"};
  std::unique_ptr<ChildProcess> first = ChildProcess::Start(InRoot(DdprunEnvJob(options)));
  std::unique_ptr<ChildProcess> second = ChildProcess::Start(InRoot(DdprunEnvJob(options)));
  ProcessResult a = first->Wait(absl::Seconds(60));
  ProcessResult b = second->Wait(absl::Seconds(60));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  ExpectRanksWrote(4);
}

TEST_F(GpuBundleTest, MultiNodeJobThroughDdprunMaster) {
  const int port = FreeLoopbackPort();
  std::unique_ptr<ChildProcess> master = ChildProcess::Start(
      InRoot({Bundled("ddprun-master"), "--host", "127.0.0.1", "--port", std::to_string(port)}));
  const std::vector<std::string> options = {
      "--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
      absl::StrCat("--rdzv-endpoint=127.0.0.1:", port), "--rdzv-id=bundle"};
  std::unique_ptr<ChildProcess> first = ChildProcess::Start(InRoot(DdprunEnvJob(options)));
  std::unique_ptr<ChildProcess> second = ChildProcess::Start(InRoot(DdprunEnvJob(options)));
  ProcessResult a = first->Wait(absl::Seconds(60));
  ProcessResult b = second->Wait(absl::Seconds(60));
  ASSERT_EQ(a.exit_code, 0) << a.err << master->ErrSoFar();
  ASSERT_EQ(b.exit_code, 0) << b.err;
  ExpectRanksWrote(2);
}

// Copies this host's CUDA runtime and NCCL (those ddp-allreduce was linked with) into
// `folder(name)` for each; returns their names.
std::vector<std::string> CopyCudaLibraries(
    const std::function<std::string(const std::string&)>& folder) {
  ProcessResult host = RunProcess({"/usr/bin/ldd", DDP_ALLREDUCE_BIN});
  EXPECT_EQ(host.exit_code, 0) << host.err;
  std::vector<std::string> names;
  for (absl::string_view line : absl::StrSplit(host.out, '\n')) {
    // "\tlibnccl.so.2 => /usr/local/cuda/lib/libnccl.so.2 (0x...)"
    std::vector<std::string> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() < 3 || fields[1] != "=>") continue;
    const std::string& name = fields[0];
    if (!absl::StartsWith(name, "libcudart.so.") && !absl::StartsWith(name, "libnccl.so."))
      continue;
    EXPECT_EQ(RunProcess({"/bin/mkdir", "-p", folder(name)}).exit_code, 0);
    EXPECT_EQ(RunProcess({"/bin/cp", "-L", fields[2], folder(name) + "/" + name}).exit_code, 0);
    names.push_back(name);
  }
  EXPECT_EQ(names.size(), 2u) << host.out;
  return names;
}

// CUDA's runtime and NCCL are not in the bundle: the programs that need them load them from
// a folder given as on the GPU machine (LD_LIBRARY_PATH), and the rest from the bundle.
TEST_F(GpuBundleTest, CudaProgramsTakeTheRuntimeAndNcclFromTheFolderTheyAreGiven) {
  const std::vector<std::string> names =
      CopyCudaLibraries([&](const std::string&) { return root_ / "opt/nvidia/lib"; });
  ASSERT_FALSE(HasFailure());

  const std::string loader = "/lib64/ld-linux-x86-64.so.2";
  ProcessResult alone = RunInRoot({loader, "--list", Bundled("ddp-allreduce")});
  EXPECT_NE(alone.exit_code, 0) << "CUDA's runtime or NCCL was found without being given";
  EXPECT_THAT(alone.out + alone.err, HasSubstr("libcudart.so"));

  for (const std::string& program : {Bundled("ddp-allreduce"), Bundled("gpu_nccl_tests"),
                                     std::string(kBundle) + "/lib/libddp_worker.so.0"}) {
    ProcessResult listed =
        RunInRoot({loader, "--library-path", "/opt/nvidia/lib", "--list", program});
    EXPECT_EQ(listed.exit_code, 0) << program << ": " << listed.out << listed.err;
    EXPECT_THAT(listed.out, Not(HasSubstr("not found"))) << program;
    for (const std::string& name : names) {
      EXPECT_THAT(listed.out, HasSubstr(name + " => /opt/nvidia/lib/" + name)) << program;
    }
    EXPECT_THAT(listed.out, HasSubstr("libstdc++.so.6 => /bundle/")) << program;
  }

  // Run for real: ddprun starts it, it loads everything and gets as far as asking CUDA for a
  // device, which a root without the driver's libcuda has none of.
  ProcessResult run = RunInRoot({Bundled("ddprun"), "--standalone", "--nproc-per-node=1",
                                 "--no-python", Bundled("ddp-allreduce")},
                                {{"LD_LIBRARY_PATH", "/opt/nvidia/lib"}});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_THAT(run.err, HasSubstr("ddp-allreduce: no CUDA device visible"));
  ProcessResult listed = RunInRoot({Bundled("gpu_nccl_tests"), "--gtest_list_tests"},
                                   {{"LD_LIBRARY_PATH", "/opt/nvidia/lib"}});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr("WatchdogAbortsAHungCollectiveOnSigterm"));
}

// tests/gpu/run.sh --bundle as on the GPU machine, but without a GPU: in the torch 2.x root
// (Debian 13: another glibc, bash, Python with PyTorch), with CUDA's runtime and NCCL where
// NVIDIA's wheels put them (nvidia/cu13/lib, nvidia/nccl/lib on the Python path), CUDA's
// stub libcuda, and a stand-in nvidia-smi that lists one GPU. It must find each library
// there, run the three programs from the bundle (their GPU tests fail, as they must here,
// and the others pass), and leave the results and the log in $OUT.
TEST_F(GpuBundleTest, RunShFindsTheLibrariesBesidePyTorchRunsEveryProgramAndWritesItsResults) {
  const char* torch2_root = ::getenv("DDPRUN_TORCH2_ROOT");
  if (torch2_root == nullptr) {
    GTEST_SKIP()
        << "DDPRUN_TORCH2_ROOT is not set: scripts/test.sh makes the torch 2.x root as root";
  }
  const std::string os_root = torch2_root;
  TempDir mnt;  // becomes /mnt in that root
  for (const char* folder : {"repo", "out", "bin", "site/nvidia/driver/lib"}) {
    ASSERT_EQ(RunProcess({"/bin/mkdir", "-p", mnt / folder}).exit_code, 0);
  }
  CopyCudaLibraries([&](const std::string& name) {
    return mnt / (name.rfind("libnccl", 0) == 0 ? "site/nvidia/nccl/lib" : "site/nvidia/cu13/lib");
  });
  ASSERT_FALSE(HasFailure());
  ProcessResult stub =
      RunProcess({"/bin/sh", "-c",
                  "cp -L \"$(ls /usr/local/cuda*/lib64/stubs/libcuda.so | head -n 1)\" \"$0\"",
                  mnt / "site/nvidia/driver/lib/libcuda.so.1"});
  ASSERT_EQ(stub.exit_code, 0) << "CUDA's stub libcuda.so: " << stub.err;
  mnt.Write("bin/nvidia-smi",
            "#!/bin/sh\n"
            "case \"$*\" in\n"
            "  -L) echo 'GPU 0: Stand-in GPU (UUID: GPU-00000000-0000-0000-0000-000000000000)' ;;\n"
            "  *query*) echo 'Stand-in GPU, 0 MiB, 0.0' ;;\n"
            "  *) echo '| NVIDIA-SMI 0.0  Driver Version: 0.0  CUDA Version: 13.0 |' ;;\n"
            "esac\n",
            0755);
  ASSERT_EQ(RunProcess({"/bin/cp", "-a", root_ / "bundle", mnt / "bundle"}).exit_code, 0);

  const std::string script = absl::StrCat(
      "mount --bind '", mnt.path(), "' '", os_root, "/mnt' && mount --bind '", kSourceDir, "' '",
      os_root, "/mnt/repo' && mount -t proc proc '", os_root, "/proc' && mount --rbind /dev '",
      os_root, "/dev' && exec chroot '", os_root,
      "' /usr/bin/env PATH=/mnt/bin:/usr/bin:/bin PYTHONPATH=/mnt/site "
      "OUT=/mnt/out RUN_BUDGET_S=240 bash /mnt/repo/tests/gpu/run.sh --bundle /mnt/bundle");
  ProcessResult run = RunProcess({"/usr/bin/unshare", "--mount", "--fork", "/bin/sh", "-c", script},
                                 {{"PYTHON_EXEC", std::nullopt}, {"LD_LIBRARY_PATH", std::nullopt}},
                                 absl::Seconds(300));
  EXPECT_EQ(run.exit_code, 1) << "without a GPU the GPU tests fail\n" << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("run.sh: PyTorch from /usr/bin/python3: 2."));
  EXPECT_THAT(run.out, HasSubstr("run.sh: libnccl.so.2 from /mnt/site/nvidia/nccl/lib"));
  EXPECT_THAT(run.out, HasSubstr("from /mnt/site/nvidia/cu13/lib"));
  EXPECT_THAT(run.out, HasSubstr("run.sh: libcuda.so.1 from /mnt/site/nvidia/driver/lib"));

  const std::string results = ReadFile(mnt / "out/gpu-results.md");
  EXPECT_THAT(results, HasSubstr("Stand-in GPU"));
  EXPECT_THAT(results, HasSubstr("- LD_LIBRARY_PATH: /mnt/site/nvidia/"));
  EXPECT_THAT(results, Not(HasSubstr("Stopped before the tests")));
  // Every program ran from the bundle; the tests that need no GPU passed in this other
  // distribution, the rest failed with their messages.
  EXPECT_THAT(results, HasSubstr("| `gpu_tests` | FAILED (exit 1) |"));
  EXPECT_THAT(results, HasSubstr("Gpu.AgentDoesNotLinkCuda OK"));
  EXPECT_THAT(results, HasSubstr("Gpu.CudaVisibleDevicesHidingEveryGpuIsAClearError OK"));
  EXPECT_THAT(results, HasSubstr("| `gpu_nccl_tests` | FAILED (exit 1) | GpuNccl."));
  EXPECT_THAT(results, HasSubstr("| `gpu_torch_tests` | FAILED (exit 1) | GpuTorch."));
  const std::string log = ReadFile(mnt / "out/gpu-tests.log");
  EXPECT_THAT(log, HasSubstr("no CUDA device visible"));
  EXPECT_THAT(log, HasSubstr("=== gpu_torch_tests"));
}

}  // namespace
}  // namespace ddprun::testing
