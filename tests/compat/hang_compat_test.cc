// Hung Python workers under ddprun, with Debian's python3-torch and no ddprun code in the
// job: torch's FileTimerClient, the heartbeat watchdog, and the report of where every rank
// was (docs/hangs.md), on one node and on two.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/small_file.h"
#include "tests/compat/compat_paths.h"
#include "tests/compat/hang_job.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kJob = kHangJob;

// The hang report of attempt 0 under `log_dir` (run id `run`).
std::string HangReportIn(const std::string& log_dir, const std::string& run) {
  absl::StatusOr<std::string> text =
      ReadSmallFile(absl::StrCat(log_dir, "/", run, "/attempt_0/hang_report.txt"));
  return text.ok() ? *text : std::string(text.status().message());
}

TEST(HangCompat, ARealFileTimerClientExpiryIsCaughtAndNamed) {
  TempDir logs, ready;
  ProcessResult r = RunProcess(
      {kDdprun, "--nproc-per-node=2", "--log-dir=" + logs.path(), kJob, "timer", "1", ready.path()},
      {{"PYTHON_EXEC", kPython}, {"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}}, absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 124)
      << r.err;  // hung (kExitHung), not the SIGABRT that took its traceback
  EXPECT_THAT(r.err, HasSubstr("rank 1: FileTimer scope 'training_step' expired at "));
  EXPECT_THAT(r.err, HasSubstr("signal SIGKILL): taken for hung"));
  // The failure summary names the hung rank as the root cause, and the report's path.
  EXPECT_THAT(r.err, HasSubstr("Root Cause (first observed failure):\n[0]:\n  time"));
  EXPECT_THAT(r.err, HasSubstr("rank      : 1 (local_rank: 1)\n  exitcode  : -6"));
  EXPECT_THAT(r.err, HasSubstr("Where every rank was: " + logs.path() +
                               "/none/attempt_0/"
                               "hang_report.txt"));
  const std::string report = HangReportIn(logs.path(), "none");
  EXPECT_THAT(report, HasSubstr("rank 1 on "));
  EXPECT_THAT(report, HasSubstr(": in " + HungRankWhere()));
  EXPECT_THAT(report, HasSubstr("rank 0 on "));
  EXPECT_THAT(report, HasSubstr(": in wait_for_peers (" + kJob));
}

TEST(HangCompat, AHungPythonWorkerLeavesItsTracebackNamingTheFunction) {
  TempDir logs;
  ProcessResult r = RunProcess({kDdprun, "--nproc-per-node=2", "--worker-heartbeat-timeout=1",
                                "--log-dir=" + logs.path(), kJob, "heartbeat", "1"},
                               {{"PYTHON_EXEC", kPython}}, absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 124) << r.err;  // hung
  // The silence said is the one measured: 1 s, or more on a loaded machine.
  EXPECT_THAT(r.err, ::testing::ContainsRegex("rank 1 sent no heartbeat for [0-9.]+m?s "
                                              "\\(--worker-heartbeat-timeout=1s\\): "
                                              "taken for hung"));
  // The console has the report's one line per rank; Python's own traceback, as faulthandler
  // printed it on the worker's stderr, is in the report file, not the console.
  EXPECT_THAT(r.err, HasSubstr(": in " + HungRankWhere()));
  EXPECT_THAT(r.err, Not(HasSubstr("Fatal Python error")));
  EXPECT_THAT(r.err,
              Not(HasSubstr(absl::StrCat("line ", HungRankLine(), " in hang_in_named_function"))));
  const std::string report = HangReportIn(logs.path(), "none");
  EXPECT_THAT(report,
              HasSubstr(absl::StrCat("line ", HungRankLine(), " in hang_in_named_function")));
  EXPECT_THAT(report, HasSubstr("hang report (round 0): rank 1 sent no heartbeat"));
  EXPECT_THAT(report, HasSubstr(": in " + HungRankWhere()));
  EXPECT_THAT(report, HasSubstr("<- declared hung"));
}

// Two agents on one machine need names of their own (--local-addr) for the report to say
// which node a rank is on. The same case as users type it, without --local-addr and with
// host names that do not resolve across hosts, runs in network namespaces:
// DdpAcrossHosts.AHungRankGivesEveryHostOneReportOfAllRanksGrouped.
TEST(HangCompat, TwoAgentsTwoWorkersOneHungRankOneReportOfAllFourGrouped) {
  TempDir logs1, logs2;
  const std::string endpoint = absl::StrCat("--rdzv-endpoint=127.0.0.1:", FreeLoopbackPort());
  auto node = [&](int n, const std::string& logs) {
    std::vector<std::string> argv = {kDdprun,
                                     "--nnodes=2",
                                     "--nproc-per-node=2",
                                     "--rdzv-backend=c10d",
                                     endpoint,
                                     "--rdzv-id=hang",
                                     absl::StrCat("--local-addr=127.0.0.", n),
                                     "--worker-heartbeat-timeout=2",
                                     "--log-dir=" + logs};
    if (n == 2) argv.push_back("--rdzv-conf=is_host=0");
    argv.insert(argv.end(), {kJob, "heartbeat", "3"});
    return argv;
  };
  auto host = ChildProcess::Start(node(1, logs1.path()), {{"PYTHON_EXEC", kPython}});
  auto other = ChildProcess::Start(node(2, logs2.path()), {{"PYTHON_EXEC", kPython}});
  ProcessResult r1 = host->Wait(absl::Seconds(90));
  ProcessResult r2 = other->Wait(absl::Seconds(90));
  EXPECT_NE(r1.exit_code, 0) << r1.err;
  EXPECT_EQ(r2.exit_code, 124) << r2.err;  // hung
  for (const std::string& logs : {logs1.path(), logs2.path()}) {
    const std::string report = HangReportIn(logs, "hang");
    SCOPED_TRACE(report);
    EXPECT_THAT(report, HasSubstr("hang report (round 0): rank 3 sent no heartbeat"));
    EXPECT_THAT(report, HasSubstr("ranks 0-2 on 127.0.0.1,127.0.0.2: in wait_for_peers (" + kJob));
    EXPECT_THAT(report, HasSubstr("(the majority: taken as healthy)"));
    EXPECT_THAT(report, HasSubstr("rank 3 on 127.0.0.2: in " + HungRankWhere() + "  (outlier)"));
    EXPECT_THAT(report, HasSubstr("suspect node: 127.0.0.2"));
    EXPECT_THAT(report, Not(HasSubstr("no stack received")));
  }
  EXPECT_THAT(r1.err + r2.err, HasSubstr("suspect node: 127.0.0.2"));
}

}  // namespace
}  // namespace ddprun::testing
