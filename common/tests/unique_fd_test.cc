// Files under a held folder, reached never through a symbolic link (docs/security.md): the
// worker's error file is read and removed this way, so that a run folder swapped for a link
// cannot make the agent read or remove a file elsewhere. Also: descriptors closed in bulk, and
// the signal names that stand in for glibc 2.32's (docs/packaging.md).
#include "common/unique_fd.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "common/process_status.h"
#include "common/small_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

using ::ddprun::testing::TempDir;

TEST(BelowAFolderTest, AFileIsReadAndRemovedButNeverThroughALink) {
  TempDir run, elsewhere;
  ASSERT_EQ(::mkdir((run.path() + "/attempt_0").c_str(), 0700), 0);
  const std::string error_file = run.Write("attempt_0/error.json", "{}");
  const std::string victim = elsewhere.Write("error.json", "root's");
  UniqueFd base(::open(run.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(base.valid());

  absl::StatusOr<UniqueFd> read = OpenForReadBelow(base.get(), run.path(), error_file);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(ReadFdPart(read->get(), 0, 100), "{}");
  ASSERT_TRUE(UnlinkBelow(base.get(), run.path(), error_file).ok());
  EXPECT_NE(::access(error_file.c_str(), F_OK), 0);
  EXPECT_TRUE(UnlinkBelow(base.get(), run.path(), error_file).ok()) << "absent is no error";
  EXPECT_EQ(OpenForReadBelow(base.get(), run.path(), error_file).status().code(),
            absl::StatusCode::kNotFound);

  // The attempt folder swapped for a link to elsewhere: nothing is read or removed there.
  ASSERT_EQ(::rmdir((run.path() + "/attempt_0").c_str()), 0);
  ASSERT_EQ(::symlink(elsewhere.path().c_str(), (run.path() + "/attempt_0").c_str()), 0);
  EXPECT_FALSE(OpenForReadBelow(base.get(), run.path(), error_file).ok());
  EXPECT_FALSE(UnlinkBelow(base.get(), run.path(), error_file).ok());
  EXPECT_EQ(*ReadSmallFile(victim), "root's");
  // The file itself a link: refused too.
  ASSERT_EQ(::unlink((run.path() + "/attempt_0").c_str()), 0);
  ASSERT_EQ(::mkdir((run.path() + "/attempt_0").c_str(), 0700), 0);
  ASSERT_EQ(::symlink(victim.c_str(), error_file.c_str()), 0);
  EXPECT_FALSE(OpenForReadBelow(base.get(), run.path(), error_file).ok());
}

// Descriptors from 5 up are closed, those below stay open (a child's count, as /proc lists).
TEST(CloseDescriptorsFromTest, ClosesFromTheLowestUpAndNothingBelow) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (int fd : {3, 4, 5, 6, 40}) ::dup2(2, fd);
    CloseDescriptorsFrom(5);
    const bool below_open = ::fcntl(3, F_GETFD) >= 0 && ::fcntl(4, F_GETFD) >= 0;
    const bool above_closed =
        ::fcntl(5, F_GETFD) < 0 && ::fcntl(6, F_GETFD) < 0 && ::fcntl(40, F_GETFD) < 0;
    ::_exit(below_open && above_closed ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << DescribeWaitStatus(status);
}

// Our table of signal names, for glibc before 2.32, says what glibc's sigabbrev_np says.
TEST(SignalAbbreviationTest, NamesEverySignalAsGlibcDoes) {
  for (int sig = 0; sig <= NSIG; ++sig) {
    const char* ours = SignalAbbreviation(sig);
    const char* glibc = ::sigabbrev_np(sig);
    if (glibc == nullptr) {
      EXPECT_EQ(ours, nullptr) << sig;
    } else {
      ASSERT_NE(ours, nullptr) << sig;
      EXPECT_STREQ(ours, glibc) << sig;
    }
  }
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(99), "signal 99");
}

}  // namespace
}  // namespace ddprun
