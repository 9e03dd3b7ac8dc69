// Files under a held folder, reached never through a symbolic link (docs/security.md): the
// worker's error file is read and removed this way, so that a run folder swapped for a link
// cannot make the agent read or remove a file elsewhere.
#include "common/unique_fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>

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

}  // namespace
}  // namespace ddprun
