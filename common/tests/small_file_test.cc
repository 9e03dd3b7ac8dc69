#include "common/small_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

using ::ddprun::testing::TempDir;
using ::testing::HasSubstr;

TEST(ReadSmallFileTest, WholeFileAndMissingFile) {
  TempDir dir;
  const std::string path = dir.Write("f", std::string("a\0b\n", 4));
  absl::StatusOr<std::string> text = ReadSmallFile(path);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, std::string("a\0b\n", 4));
  EXPECT_EQ(ReadSmallFile(dir.path() + "/missing").status().code(), absl::StatusCode::kNotFound);
}

TEST(ReadTokenFileTest, StripsWhitespaceAndNamesTheSettingOnErrors) {
  TempDir dir;
  absl::StatusOr<std::string> token = ReadTokenFile(dir.Write("t", "  s3cret\n"), "--token-file");
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "s3cret");
  const std::string missing = dir.path() + "/missing";
  EXPECT_EQ(ReadTokenFile(missing, "--token-file").status().message(),
            "--token-file='" + missing + "' cannot be read");
  const std::string blank = dir.Write("blank", " \n\t");
  EXPECT_EQ(ReadTokenFile(blank, "--rdzv-conf token_file").status().message(),
            "--rdzv-conf token_file='" + blank + "' is empty");
}

TEST(ExposedSecretFileTest, AFileOthersCanReadIsSaidWithItsModeAndTheFix) {
  TempDir dir;
  const std::string own = dir.Write("own", "s3cret", 0600);
  EXPECT_EQ(ExposedSecretFile(own, "--token-file"), "");
  const std::string shared = dir.Write("shared", "s3cret", 0644);
  EXPECT_EQ(ExposedSecretFile(shared, "--rdzv-conf token_file"),
            "--rdzv-conf token_file='" + shared +
                "' can be read by other users (mode 0644): anyone on this machine can read the "
                "secret in it; chmod 600 " +
                shared);
  const std::string group = dir.Write("group", "s3cret", 0640);
  EXPECT_NE(ExposedSecretFile(group, "--token-file"), "");
  EXPECT_EQ(ExposedSecretFile(dir.path() + "/missing", "--token-file"), "");
}

TEST(ReadPemFileTest, RefusesWhatIsNotPem) {
  TempDir dir;
  const std::string pem = dir.Write("c.pem", "-----BEGIN CERTIFICATE-----\nx\n");
  EXPECT_TRUE(ReadPemFile(pem, "tls_cert").ok());
  const std::string text = dir.Write("c.txt", "hello");
  EXPECT_THAT(std::string(ReadPemFile(text, "tls_cert").status().message()),
              HasSubstr("is not a PEM file"));
  EXPECT_THAT(std::string(ReadPemFile(dir.path() + "/none", "tls_cert").status().message()),
              HasSubstr("cannot be read"));
}

TEST(SmallFileTest, ReadFdPartReadsFromAnOffsetUpToALimitAndLeavesTheFileOffsetAlone) {
  const int fd = ::memfd_create("read-fd-part", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  const std::string text(20000, 'a');
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ASSERT_EQ(::write(fd, "END", 3), 3);
  EXPECT_EQ(ReadFdPart(fd, 20000, 100), "END");
  EXPECT_EQ(ReadFdPart(fd, 19998, 4), "aaEN");
  EXPECT_EQ(ReadFdPart(fd, 0, 100000).size(), 20003u);  // more than one read
  EXPECT_EQ(ReadFdPart(fd, 30000, 10), "");
  EXPECT_EQ(::lseek(fd, 0, SEEK_CUR), 20003);
  ::close(fd);
}

}  // namespace
}  // namespace ddprun
