// The Debian packages CPack makes (cmake/packaging.cmake): built from this build tree,
// unpacked into a scratch root with dpkg-deb -x, and run from there.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;

const std::string kBuild = BUILD_DIR;
const std::string kVersion = DDPRUN_VERSION;

class PackageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ProcessResult built = RunProcess(
        {CPACK_COMMAND, "-G", "DEB", "-B", dir_->path(), "--config", kBuild + "/CPackConfig.cmake"},
        {}, absl::Seconds(300));
    ASSERT_EQ(built.exit_code, 0) << built.out << built.err;
    const std::string arch(absl::StripTrailingAsciiWhitespace(
        RunProcess({"/usr/bin/dpkg", "--print-architecture"}).out));
    runtime_ = dir_->path() + "/ddprun_" + kVersion + "_" + arch + ".deb";
    dev_ = dir_->path() + "/ddprun-dev_" + kVersion + "_" + arch + ".deb";
    root_ = dir_->path() + "/root";
    for (const std::string& deb : {runtime_, dev_}) {
      ProcessResult x = RunProcess({"/usr/bin/dpkg-deb", "-x", deb, root_});
      ASSERT_EQ(x.exit_code, 0) << deb << ": " << x.err;
    }
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string Field(const std::string& deb, const std::string& field) {
    return RunProcess({"/usr/bin/dpkg-deb", "-f", deb, field}).out;
  }

  static TempDir* dir_;
  static std::string runtime_, dev_, root_;
};

TempDir* PackageTest::dir_ = nullptr;
std::string PackageTest::runtime_, PackageTest::dev_, PackageTest::root_;

TEST_F(PackageTest, TheUnpackedDdprunRunsAndSaysItsVersion) {
  ProcessResult r = RunProcess({root_ + "/usr/bin/ddprun", "--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "ddprun " + kVersion + "\n");
  ProcessResult master = RunProcess({root_ + "/usr/bin/ddprun-master", "--help"});
  EXPECT_EQ(master.exit_code, 0) << master.err;
}

TEST_F(PackageTest, TheUnpackedDdprunRunsJobsAndFindsItsNetworkPlugin) {
  ProcessResult one = RunProcess(
      {root_ + "/usr/bin/ddprun", "--standalone", "--nproc-per-node=2", "--no-python", "/bin/true"},
      {}, absl::Seconds(60));
  EXPECT_EQ(one.exit_code, 0) << one.err;
  // A multi-node job (--nnodes maximum above 1) loads libddprun_network.so from
  // <root>/usr/lib/ddprun; its agent hosts the master, and the round closes after the last
  // call without a second node.
  ProcessResult c10d =
      RunProcess({root_ + "/usr/bin/ddprun", "--nnodes=1:2", "--rdzv-backend=c10d",
                  absl::StrCat("--rdzv-endpoint=127.0.0.1:", FreeLoopbackPort()), "--rdzv-id=pkg",
                  "--rdzv-conf=last_call_timeout=0.1", "--no-python", "/bin/true"},
                 {{"LOGLEVEL", "INFO"}}, absl::Seconds(60));
  EXPECT_EQ(c10d.exit_code, 0) << c10d.err;
  EXPECT_THAT(c10d.err, HasSubstr("hosting the rendezvous master"));
}

TEST_F(PackageTest, RuntimeAndDevPackagesSplitTheFilesAndStateTheirDependencies) {
  EXPECT_TRUE(FileExists(root_ + "/usr/lib/ddprun/libddprun_network.so"));
  EXPECT_TRUE(FileExists(root_ + "/usr/lib/libddp_worker.so.0"));
  EXPECT_TRUE(FileExists(root_ + "/usr/lib/libddp_worker.so"));
  EXPECT_TRUE(FileExists(root_ + "/usr/include/ddp/worker/store.h"));
  EXPECT_TRUE(FileExists(root_ + "/usr/include/ddp_worker.h"));
  EXPECT_TRUE(FileExists(root_ + "/usr/lib/cmake/ddprun/ddprunConfig.cmake"));
  EXPECT_TRUE(FileExists(root_ + "/usr/lib/pkgconfig/ddp-worker.pc"));
  EXPECT_TRUE(FileExists(root_ + "/usr/share/man/man1/ddprun.1"));
  EXPECT_TRUE(FileExists(root_ + "/usr/share/bash-completion/completions/ddprun"));
  EXPECT_TRUE(FileExists(root_ + "/usr/share/zsh/vendor-completions/_ddprun"));
  const std::string runtime_files = RunProcess({"/usr/bin/dpkg-deb", "-c", runtime_}).out;
  EXPECT_THAT(runtime_files, Not(HasSubstr("include/")));
  EXPECT_THAT(Field(runtime_, "Depends"), HasSubstr("libgrpc++"));
  EXPECT_THAT(Field(runtime_, "Depends"), HasSubstr("libhwloc15"));  // --numa-binding
  EXPECT_THAT(Field(dev_, "Depends"), HasSubstr("ddprun (= " + kVersion + ")"));
  EXPECT_EQ(Field(dev_, "Package"), "ddprun-dev\n");
}

TEST_F(PackageTest, TheWorkerLibraryNeedsNoHttpServerAndNoMetricsLibrary) {
  // Workers link libddp_worker for the Store and NCCL: the master's --metrics-port page
  // (civetweb, prometheus-cpp) is not theirs to load.
  ProcessResult dynamic =
      RunProcess({"/usr/bin/readelf", "-d", root_ + "/usr/lib/libddp_worker.so"});
  ASSERT_EQ(dynamic.exit_code, 0) << dynamic.err;
  ASSERT_THAT(dynamic.out, HasSubstr("(NEEDED)"));
  ASSERT_THAT(dynamic.out, HasSubstr("libgrpc++"));  // what it does need: the Store's gRPC
  EXPECT_THAT(dynamic.out, Not(HasSubstr("civetweb")));
  EXPECT_THAT(dynamic.out, Not(HasSubstr("prometheus")));
}

TEST_F(PackageTest, TheWorkerLibraryHoldsTheStoreButNoRendezvousMaster) {
  // Rank 0's Store is the master's Store service served alone (rpc/store_only_server.h):
  // the rendezvous rules, sessions and admin are not linked in.
  ProcessResult symbols = RunProcess(
      {"/usr/bin/nm", "-D", "-C", "--defined-only", root_ + "/usr/lib/libddp_worker.so"});
  ASSERT_EQ(symbols.exit_code, 0) << symbols.err;
  ASSERT_THAT(symbols.out, HasSubstr("ddprun::StoreOnlyHost"));
  EXPECT_THAT(symbols.out, Not(HasSubstr("ddprun::MasterState")));
  EXPECT_THAT(symbols.out, Not(HasSubstr("ddprun::MasterServer")));
  EXPECT_THAT(symbols.out, Not(HasSubstr("ddprun::RoundStateMachine")));
}

}  // namespace
}  // namespace ddprun::testing
