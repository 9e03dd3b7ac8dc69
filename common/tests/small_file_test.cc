#include "common/small_file.h"

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

}  // namespace
}  // namespace ddprun
