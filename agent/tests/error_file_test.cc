#include "agent/logs/error_file.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using ::ddprun::testing::TempDir;

constexpr char kTorchFormat[] = R"({
  "message": {
    "message": "RuntimeError: x",
    "extraInfo": {
      "py_callstack": "Traceback (most recent call last):\n  File \"t.py\", line 1\nRuntimeError: x\n",
      "timestamp": "1700000000"
    }
  }
})";

TEST(ParseWorkerErrorFileTest, TorchFormat) {
  absl::StatusOr<WorkerError> report = ParseWorkerErrorFile(kTorchFormat);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->message, "RuntimeError: x");
  EXPECT_EQ(report->traceback,
            "Traceback (most recent call last):\n  File \"t.py\", line 1\nRuntimeError: x\n");
  ASSERT_TRUE(report->timestamp.has_value());
  EXPECT_EQ(*report->timestamp, absl::FromUnixSeconds(1700000000));
}

TEST(ParseWorkerErrorFileTest, NumericAndFractionalTimestamp) {
  absl::StatusOr<WorkerError> report = ParseWorkerErrorFile(
      R"({"message": {"message": "m", "extraInfo": {"timestamp": 1700000000.5}}})");
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(report->timestamp.has_value());
  EXPECT_EQ(*report->timestamp, absl::FromUnixMillis(1700000000500));
  EXPECT_EQ(report->traceback, "");
}

TEST(ParseWorkerErrorFileTest, UnreadableTimestampIsLeftUnset) {
  absl::StatusOr<WorkerError> report =
      ParseWorkerErrorFile(R"({"message": {"message": "m", "extraInfo": {"timestamp": "soon"}}})");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->timestamp.has_value());
}

TEST(ParseWorkerErrorFileTest, PlainStringMessage) {
  absl::StatusOr<WorkerError> report = ParseWorkerErrorFile(R"({"message": "plain"})");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->message, "plain");
  EXPECT_EQ(report->traceback, "");
  EXPECT_FALSE(report->timestamp.has_value());
}

TEST(ParseWorkerErrorFileTest, ObjectWithoutExtraInfo) {
  absl::StatusOr<WorkerError> report = ParseWorkerErrorFile(R"({"message": {"message": "only"}})");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->message, "only");
  EXPECT_FALSE(report->timestamp.has_value());
}

TEST(ParseWorkerErrorFileTest, InvalidJsonIsAnError) {
  for (const std::string json : {"", "{", "not json", R"({"message": )"}) {
    absl::StatusOr<WorkerError> report = ParseWorkerErrorFile(json);
    ASSERT_FALSE(report.ok()) << "accepted '" << json << "'";
    EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(ParseWorkerErrorFileTest, MissingMessageIsAnError) {
  absl::StatusOr<WorkerError> report = ParseWorkerErrorFile(R"({"error": "x"})");
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(report.status().message()), HasSubstr("\"message\""));
}

TEST(ParseWorkerErrorFileTest, MessageOfAnotherTypeIsAnError) {
  absl::StatusOr<WorkerError> report = ParseWorkerErrorFile(R"({"message": 3})");
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LastLinesOfFileTest, LastLines) {
  TempDir dir;
  const std::string path = dir.Write("stderr.log", "one\ntwo\nthree\nfour\n");
  EXPECT_THAT(LastLinesOfFile(path, 2), ElementsAre("three", "four"));
  EXPECT_THAT(LastLinesOfFile(path, 10), ElementsAre("one", "two", "three", "four"));
  EXPECT_THAT(LastLinesOfFile(path, 0), IsEmpty());
}

TEST(LastLinesOfFileTest, LastLineWithoutNewline) {
  TempDir dir;
  const std::string path = dir.Write("stderr.log", "one\ntwo");
  EXPECT_THAT(LastLinesOfFile(path, 5), ElementsAre("one", "two"));
}

TEST(LastLinesOfFileTest, EmptyAndMissingFiles) {
  TempDir dir;
  EXPECT_THAT(LastLinesOfFile(dir.Write("empty.log", ""), 5), IsEmpty());
  EXPECT_THAT(LastLinesOfFile(dir.path() + "/missing.log", 5), IsEmpty());
}

TEST(LastLinesOfFileTest, LargeFileReadsOnlyItsEnd) {
  TempDir dir;
  std::string contents;
  for (int i = 0; i < 20000; ++i) contents += "line " + std::to_string(i) + "\n";
  ASSERT_GT(contents.size(), 64u * 1024);
  const std::string path = dir.Write("big.log", contents);
  EXPECT_THAT(LastLinesOfFile(path, 3), ElementsAre("line 19997", "line 19998", "line 19999"));
}

TEST(ParseWorkerErrorFileTest, AbsurdTimestampsAreIgnoredNotTrusted) {
  for (const char* ts : {"\"nan\"", "\"1e300\"", "\"-5\"", "\"inf\""}) {
    absl::StatusOr<WorkerError> report = ParseWorkerErrorFile(
        std::string(R"({"message": {"message": "m", "extraInfo": {"timestamp": )") + ts + "}}}");
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_FALSE(report->timestamp.has_value()) << ts;
  }
}

}  // namespace
}  // namespace ddprun
