// Worker output: tee prefixes, whole lines, nothing lost, log files per attempt.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(Output, TeeOfAHundredThousandFastLinesPerWorkerLosesAndSplitsNone) {
  constexpr int kLines = 100000;
  TempDir logs;
  ProcessResult r = RunProcess(DdprunWithTestWorker(
      {"--nproc-per-node=2", "-t", "3", "--log-dir", logs.path(), "--rdzv-id=spew"},
      {"spew", std::to_string(kLines)}));
  ASSERT_EQ(r.exit_code, 0) << r.err.substr(0, 2000);
  int counts[2] = {0, 0};
  int next[2] = {0, 0};
  bool in_order = true;
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
    // Every line must be exactly "[default<r>]:rank <r> line <n>".
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ');
    ASSERT_EQ(words.size(), 4u) << "torn or foreign line: " << line;
    const int rank = words[0] == "[default0]:rank" ? 0 : words[0] == "[default1]:rank" ? 1 : -1;
    ASSERT_NE(rank, -1) << "torn or foreign line: " << line;
    ASSERT_EQ(words[1], std::to_string(rank)) << line;
    ASSERT_EQ(words[2], "line") << line;
    int n = -1;
    ASSERT_TRUE(absl::SimpleAtoi(words[3], &n)) << line;
    in_order = in_order && n == next[rank];
    next[rank] = n + 1;
    ++counts[rank];
  }
  EXPECT_EQ(counts[0], kLines);
  EXPECT_EQ(counts[1], kLines);
  EXPECT_TRUE(in_order);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string file = logs / ("spew/attempt_0/" + std::to_string(rank) + "/stdout.log");
    EXPECT_EQ(CountLinesContaining(ReadFile(file), " line "), kLines) << file;
  }
}

TEST(Output, PartialLastLineIsFlushed) {
  TempDir logs;
  ProcessResult r = RunProcess(DdprunWithTestWorker(
      {"-t", "1", "--log-dir", logs.path(), "--rdzv-id=p"}, {"partial", "no newline at the end"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[default0]:no newline at the end\n");
  EXPECT_EQ(ReadFile(logs / "p/attempt_0/0/stdout.log"), "no newline at the end");
}

TEST(Output, RedirectSendsToFilesNotConsole) {
  TempDir logs;
  ProcessResult r = RunProcess(DdprunWithTestWorker(
      {"--nproc-per-node=2", "-r", "1", "--log-dir", logs.path(), "--rdzv-id=r"}, {"spew", "3"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(ReadFile(logs / "r/attempt_1/0/stdout.log"), "");  // no such attempt: empty read
  EXPECT_EQ(ReadFile(logs / "r/attempt_0/1/stdout.log"),
            "rank 1 line 0\nrank 1 line 1\nrank 1 line 2\n");
}

TEST(Output, PerRankMapsAcceptMultiDigitRanks) {
  TempDir logs;
  ProcessResult r = RunProcess(DdprunWithTestWorker(
      {"--nproc-per-node=11", "-t", "10:1", "--log-dir", logs.path(), "--rdzv-id=m"},
      {"spew", "1"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[default10]:rank 10 line 0\n"));
  EXPECT_EQ(ReadFile(logs / "m/attempt_0/10/stdout.log"), "rank 10 line 0\n");
  EXPECT_THAT(r.out, HasSubstr("rank 3 line 0\n"));  // not tee'd: plain, on the console
}

TEST(Output, FilteredRanksKeepTheirOutputInFiles) {
  TempDir logs;
  ProcessResult r = RunProcess(DdprunWithTestWorker(
      {"--nproc-per-node=2", "--local-ranks-filter=1", "--log-dir", logs.path(), "--rdzv-id=f"},
      {"spew", "2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("rank 1 line 1"));
  EXPECT_THAT(r.out, Not(HasSubstr("rank 0")));
  EXPECT_EQ(ReadFile(logs / "f/attempt_0/0/stdout.log"), "rank 0 line 0\nrank 0 line 1\n");
}

TEST(Output, AttemptsAreNumberedAndNeverOverwritten) {
  TempDir logs, dir;
  ProcessResult r = RunProcess(DdprunWithTestWorker({"--nproc-per-node=2", "--max-restarts=1", "-r",
                                                     "3", "--log-dir", logs.path(), "--rdzv-id=a"},
                                                    {"crash-once", "1", "3", dir.path()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(ReadFile(logs / "a/attempt_0/1/stderr.log"), HasSubstr("rank 1: simulated crash"));
  EXPECT_TRUE(FileExists(logs / "a/attempt_1/1/stderr.log"));
  EXPECT_EQ(ReadFile(logs / "a/attempt_1/1/stderr.log"), "");
}

TEST(Output, SummaryTailComesFromTheLogFileWhenStderrIsRedirected) {
  TempDir logs, dir;
  ProcessResult r = RunProcess(DdprunWithTestWorker(
      {"--nproc-per-node=2", "-r", "2", "--log-dir", logs.path(), "--rdzv-id=s"},
      {"crash-once", "0", "9", dir.path()}));
  EXPECT_EQ(r.exit_code, 9);
  EXPECT_THAT(r.err, HasSubstr("s/attempt_0/0/stderr.log):\n    rank 0: simulated crash"));
}

TEST(Output, PrefixTemplateFromTheEnvironment) {
  ProcessResult r =
      RunProcess(DdprunWithTestWorker({"-t", "1", "--role=trainer"}, {"spew", "1"}),
                 {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "${role_name}/${rank}> "}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "trainer/0> rank 0 line 0\n");
}

TEST(Output, StderrCarriageReturnReachesTheConsoleAtOnce) {
  TempDir dir;
  auto agent = ChildProcess::Start(DdprunWithTestWorker({}, {"progress", dir.path()}));
  // A progress bar redrawn with '\r' must show before the line ends.
  const bool shown =
      WaitUntil([&] { return agent->ErrSoFar().find("progress 50%\r") != std::string::npos; },
                absl::Seconds(10));
  WriteFile(dir / "release", "");
  ProcessResult r = agent->Wait(absl::Seconds(10));
  EXPECT_TRUE(shown);
  EXPECT_EQ(r.exit_code, 0);
}

TEST(Output, UntouchedStderrKeepsItsBytes) {
  ProcessResult r = RunProcess(
      {kDdprun, "--no-python", "/bin/sh", "-c", "printf 'a\\r b\\n' >&2; printf 'tail' >&2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "a\r b\ntail\n");
}

TEST(Output, ASecondRunWithTheSameIdContinuesTheAttemptNumbers) {
  TempDir logs;
  const auto argv =
      DdprunWithTestWorker({"-r", "1", "--log-dir", logs.path(), "--rdzv-id=again"}, {"spew", "1"});
  ASSERT_EQ(RunProcess(argv).exit_code, 0);
  ProcessResult second = RunProcess(argv);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(ReadFile(logs / "again/attempt_0/0/stdout.log"), "rank 0 line 0\n");
  EXPECT_EQ(ReadFile(logs / "again/attempt_1/0/stdout.log"), "rank 0 line 0\n");
  EXPECT_THAT(second.err, HasSubstr("this run's logs start at attempt_1"));
}

TEST(Output, InterruptedRunLeavesNoEmptyTemporaryFolder) {
  TempDir tmp, dir;
  auto agent = ChildProcess::Start(DdprunWithTestWorker({}, {"wait-signal", dir.path()}),
                                   {{"TMPDIR", tmp.path()}});
  ASSERT_TRUE(WaitUntil([&] { return FileExists(dir / "ready.0"); }, absl::Seconds(10)));
  kill(agent->pid(), SIGINT);
  ProcessResult r = agent->Wait(absl::Seconds(10));
  EXPECT_EQ(r.exit_code, 128 + SIGINT);
  EXPECT_EQ(RunProcess({"/bin/ls", "-A", tmp.path()}).out, "");
  EXPECT_THAT(r.err, Not(HasSubstr("worker logs and error files are in")));
}

TEST(Output, TemporaryFolderIsKeptAndNamedWhenItHoldsAnErrorFile) {
  TempDir tmp;
  ProcessResult r =
      RunProcess(DdprunWithTestWorker({}, {"error-file", "4"}), {{"TMPDIR", tmp.path()}});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_THAT(r.err, HasSubstr("worker logs and error files are in " + tmp.path() + "/ddprun-"));
}

}  // namespace
}  // namespace ddprun::testing
