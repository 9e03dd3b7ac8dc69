// --log-dir against another user on the same machine: a run folder swapped for a link while
// the agent waits in rendezvous, a link or a stranger's folder planted before it starts, a
// log dir anyone may write to. None of them may send a worker's output elsewhere.

#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::vector<std::string> OneNode(const std::string& log_dir, const std::string& out_dir) {
  return DdprunWithTestWorker(
      {"--nproc-per-node=1", "--rdzv-id=job", "--log-dir=" + log_dir, "--redirects=3"},
      {"env", out_dir});
}

TEST(LogDir, TheRunFolderIsPrivateWhateverTheUmask) {
  TempDir dir;
  ProcessResult r =
      RunProcess({"/bin/sh", "-c",
                  absl::StrCat("umask 0; exec ", kDdprun,
                               " --nproc-per-node=1 --rdzv-id=job --log-dir=", dir / "logs",
                               " --redirects=3 --no-python /bin/true")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  struct stat st;
  ASSERT_EQ(::stat((dir / "logs/job").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(LogDir, APlantedLinkOrAFolderAnyoneMayWriteIsRefusedWithExit2) {
  TempDir dir;
  fs::create_directories(dir / "logs");
  fs::create_directories(dir / "victim");
  fs::create_directory_symlink(dir / "victim", dir / "logs/job");
  ProcessResult link = RunProcess(OneNode(dir / "logs", dir.path()));
  EXPECT_EQ(link.exit_code, 2) << link.err;
  EXPECT_THAT(link.err, HasSubstr("is a symbolic link"));
  EXPECT_TRUE(fs::is_empty(dir / "victim"));

  fs::create_directories(dir / "open");
  ASSERT_EQ(::chmod((dir / "open").c_str(), 0777), 0);
  ProcessResult open = RunProcess(OneNode(dir / "open/logs", dir.path()));
  EXPECT_EQ(open.exit_code, 2) << open.err;
  EXPECT_THAT(open.err, HasSubstr("may be written by anyone and has no sticky bit"));
  ASSERT_EQ(::chmod((dir / "open").c_str(), 01777), 0);  // as /tmp: fine
  EXPECT_EQ(RunProcess(OneNode(dir / "open/logs", dir.path())).exit_code, 0);
}

TEST(LogDir, AnotherUsersRunFolderIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a folder to another user";
  TempDir dir;
  fs::create_directories(dir / "logs/job");
  ASSERT_EQ(::chown((dir / "logs/job").c_str(), 65534, 65534), 0);
  ProcessResult r = RunProcess(OneNode(dir / "logs", dir.path()));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("belongs to another user"));
}

// The review's attack: while the agent waits for the other node, the run folder is renamed
// and a link to a folder of the attacker's choice put in its place. The agent goes on
// writing into the folder it made (now renamed), never through the link. The command lines
// are a user's: no --local-addr (the endpoint is each agent's own machine).
TEST(LogDir, ARunFolderSwappedForALinkDuringRendezvousSendsNothingThere) {
  TempDir dir;
  fs::create_directories(dir / "victim");
  const int port = FreeLoopbackPort();
  auto node = [&](int n) {
    return DdprunWithTestWorker({"--nnodes=2", "--nproc-per-node=1", "--rdzv-backend=c10d",
                                 absl::StrCat("--rdzv-endpoint=127.0.0.1:", port), "--rdzv-id=job",
                                 absl::StrCat("--rdzv-conf=is_host=", n == 1),
                                 "--log-dir=" + (dir / absl::StrCat("logs", n)), "--redirects=3"},
                                {"env", dir.path()});
  };
  auto a = ChildProcess::Start(node(1));
  // Once it waits for the other node, its run folder is made and open (the folder alone
  // appears a moment before it is opened: a swap then is refused, as it should be, but
  // it is not this attack).
  ASSERT_TRUE(
      WaitUntil([&] { return a->ErrSoFar().find("waiting for a round") != std::string::npos; },
                absl::Seconds(60)))
      << a->ErrSoFar();
  ASSERT_TRUE(FileExists(dir / "logs1/job"));
  fs::rename(dir / "logs1/job", dir / "logs1/moved");
  fs::create_directory_symlink(dir / "victim", dir / "logs1/job");
  auto b = ChildProcess::Start(node(2));
  ProcessResult ra = a->Wait(absl::Seconds(60));
  ProcessResult rb = b->Wait(absl::Seconds(60));
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  EXPECT_TRUE(fs::is_empty(dir / "victim")) << "the agent wrote through the planted link";
  EXPECT_TRUE(FileExists(dir / "logs1/moved/attempt_0/0/stdout.log"));
}

}  // namespace
}  // namespace ddprun::testing
