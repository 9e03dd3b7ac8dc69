#include "agent/failure_summary.h"

#include <signal.h>
#include <sys/wait.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ddprun {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

int Exited(int code) { return W_EXITCODE(code, 0); }
int Killed(int sig) { return W_EXITCODE(0, sig); }

WorkerFailure Failure(int rank, absl::Time time, int wait_status) {
  WorkerFailure f;
  f.time = time;
  f.host = "node1";
  f.rank = rank;
  f.local_rank = rank;
  f.wait_status = wait_status;
  f.pid = 1000 + rank;
  f.stderr_source = "/logs/run/attempt_0/" + std::to_string(rank) + "/stderr.log";
  return f;
}

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

std::string Summary(const std::vector<WorkerFailure>& failures,
                    const std::string& entrypoint = "train.py", const MeetingPoint& meeting = {}) {
  SummaryContext context;
  context.entrypoint = entrypoint;
  context.zone = absl::UTCTimeZone();
  context.meeting = meeting;
  return FormatFailureSummary(failures, context);
}

TEST(ExitCodeTest, NormalExit) {
  EXPECT_EQ(TorchExitCode(Exited(0)), 0);
  EXPECT_EQ(TorchExitCode(Exited(1)), 1);
  EXPECT_EQ(TorchExitCode(Exited(255)), 255);
  EXPECT_EQ(ShellExitCode(Exited(0)), 0);
  EXPECT_EQ(ShellExitCode(Exited(3)), 3);
  EXPECT_EQ(ShellExitCode(Exited(255)), 255);
}

TEST(ExitCodeTest, KilledBySignal) {
  EXPECT_EQ(TorchExitCode(Killed(SIGKILL)), -9);
  EXPECT_EQ(TorchExitCode(Killed(SIGTERM)), -15);
  EXPECT_EQ(ShellExitCode(Killed(SIGKILL)), 137);
  EXPECT_EQ(ShellExitCode(Killed(SIGSEGV)), 139);
}

TEST(RootCauseIndexTest, PicksTheEarliest) {
  std::vector<WorkerFailure> failures = {Failure(0, kT0 + absl::Seconds(3), Exited(1)),
                                         Failure(1, kT0 + absl::Seconds(1), Exited(1)),
                                         Failure(2, kT0 + absl::Seconds(2), Exited(1))};
  EXPECT_EQ(RootCauseIndex(failures), 1u);
}

TEST(RootCauseIndexTest, TiesGoToTheFirstGiven) {
  std::vector<WorkerFailure> failures = {Failure(0, kT0 + absl::Seconds(2), Exited(1)),
                                         Failure(1, kT0, Exited(1)), Failure(2, kT0, Exited(1))};
  EXPECT_EQ(RootCauseIndex(failures), 1u);
  EXPECT_EQ(RootCauseIndex({Failure(0, kT0, Exited(1))}), 0u);
}

TEST(FormatFailureSummaryTest, OneFailureWithStderrTail) {
  WorkerFailure f = Failure(0, kT0, Exited(3));
  f.stderr_tail = {"Traceback (most recent call last):", "ValueError: bad"};
  const std::string text = Summary({f});
  EXPECT_THAT(text, HasSubstr("train.py FAILED"));
  EXPECT_THAT(text, HasSubstr("Failures:\n  <NO_OTHER_FAILURES>\n"));
  EXPECT_THAT(text, HasSubstr("Root Cause (first observed failure):\n[0]:\n"));
  EXPECT_THAT(text, HasSubstr("time      : 2023-11-14_22:13:20"));
  EXPECT_THAT(text, HasSubstr("host      : node1"));
  EXPECT_THAT(text, HasSubstr("rank      : 0 (local_rank: 0)"));
  EXPECT_THAT(text, HasSubstr("exitcode  : 3 (pid: 1000)"));
  EXPECT_THAT(text, HasSubstr("error_file: <N/A>"));
  EXPECT_THAT(text, HasSubstr("last 2 lines (/logs/run/attempt_0/0/stderr.log)"));
  EXPECT_THAT(text, HasSubstr("    Traceback (most recent call last):\n    ValueError: bad\n"));
}

TEST(FormatFailureSummaryTest, EmptyStderrSaysSo) {
  WorkerFailure f = Failure(0, kT0, Exited(1));
  f.stderr_source = "stderr";
  const std::string text = Summary({f});
  EXPECT_THAT(text, HasSubstr("stderr    : <empty> (stderr)"));
  EXPECT_THAT(text, HasSubstr("traceback : none written"));
}

TEST(FormatFailureSummaryTest, SignalNamesTheSignalAndPid) {
  WorkerFailure f = Failure(1, kT0, Killed(SIGKILL));
  const std::string text = Summary({f});
  EXPECT_THAT(text, HasSubstr("exitcode  : -9 (pid: 1001)"));
  EXPECT_THAT(text, HasSubstr("Signal 9 (SIGKILL) received by PID 1001"));
}

TEST(FormatFailureSummaryTest, ErrorFileGivesPathAndTraceback) {
  WorkerFailure f = Failure(0, kT0, Exited(1));
  f.error_file = "/logs/run/attempt_0/0/error.json";
  f.error_message = "RuntimeError: boom";
  f.traceback = "Traceback (most recent call last):\n  File \"train.py\", line 3\n";
  f.stderr_tail = {"stderr line that must not show"};
  const std::string text = Summary({f});
  EXPECT_THAT(text, HasSubstr("error_file: /logs/run/attempt_0/0/error.json"));
  EXPECT_THAT(text, HasSubstr("traceback : RuntimeError: boom\n"
                              "              Traceback (most recent call last):\n"
                              "                File \"train.py\", line 3\n"));
  EXPECT_THAT(text, Not(HasSubstr("stderr line that must not show")));
  EXPECT_THAT(text, Not(HasSubstr("<N/A>")));
}

TEST(FormatFailureSummaryTest, ErrorFileWithoutTracebackShowsTheMessage) {
  WorkerFailure f = Failure(0, kT0, Exited(1));
  f.error_file = "/e.json";
  f.error_message = "plain";
  const std::string text = Summary({f});
  EXPECT_THAT(text, HasSubstr("traceback : plain\n"));
}

// A broken error file says why, and nothing is lost: the stderr tail shows too.
TEST(FormatFailureSummaryTest, AnUnreadableErrorFileShowsTheStderrTailToo) {
  WorkerFailure f = Failure(0, kT0, Exited(1));
  f.error_file = "/e.json";
  f.error_file_unreadable = true;
  f.error_message = "(the error file is unreadable: /e.json: not valid JSON: ...)";
  f.stderr_tail = {"RuntimeError: the real reason"};
  const std::string text = Summary({f});
  EXPECT_THAT(text, HasSubstr("traceback : (the error file is unreadable"));
  EXPECT_THAT(text, HasSubstr("    RuntimeError: the real reason\n"));
}

TEST(FormatFailureSummaryTest, OtherFailuresAreListedUnderFailures) {
  std::vector<WorkerFailure> failures = {Failure(0, kT0 + absl::Seconds(5), Killed(SIGTERM)),
                                         Failure(1, kT0, Exited(2)),
                                         Failure(2, kT0 + absl::Seconds(6), Killed(SIGTERM))};
  const std::string text = Summary(failures, "mod.train");
  EXPECT_THAT(text, HasSubstr("mod.train FAILED"));
  EXPECT_THAT(text, Not(HasSubstr("<NO_OTHER_FAILURES>")));

  const size_t failures_at = text.find("Failures:\n");
  const size_t root_at = text.find("Root Cause (first observed failure):");
  ASSERT_NE(failures_at, std::string::npos);
  ASSERT_NE(root_at, std::string::npos);
  const std::string others = text.substr(failures_at, root_at - failures_at);
  const std::string root = text.substr(root_at);

  EXPECT_THAT(others, HasSubstr("[1]:\n"));
  EXPECT_THAT(others, HasSubstr("[2]:\n"));
  EXPECT_THAT(others, Not(HasSubstr("[0]:")));
  EXPECT_LT(others.find("rank      : 0"), others.find("rank      : 2"));
  EXPECT_THAT(others, Not(HasSubstr("rank      : 1")));
  EXPECT_THAT(root, HasSubstr("[0]:\n"));
  EXPECT_THAT(root, HasSubstr("rank      : 1 (local_rank: 1)"));
  EXPECT_THAT(root, HasSubstr("exitcode  : 2 (pid: 1001)"));
}

TEST(FormatFailureSummaryTest, FramedByRules) {
  const std::string text = Summary({Failure(0, kT0, Exited(1))});
  const std::string heavy(60, '=');
  EXPECT_EQ(text.rfind(heavy + "\ntrain.py FAILED\n", 0), 0u);
  EXPECT_EQ(text.substr(text.size() - heavy.size() - 1), heavy + "\n");
}

TEST(FormatFailureSummaryTest, SaysWhereTheWorkersMeetWhenTheRootCauseIsAboutReachingIt) {
  WorkerFailure f = Failure(1, kT0, Exited(1));
  f.stderr_tail = {"torch.distributed.DistNetworkError: Connection refused"};
  const MeetingPoint meeting{"10.0.0.1", 29500};
  EXPECT_THAT(Summary({f}, "train.py", meeting),
              HasSubstr("Workers meet at: MASTER_ADDR=10.0.0.1 MASTER_PORT=29500\n"));
  EXPECT_THAT(Summary({f}), Not(HasSubstr("Workers meet at")));  // none given: one node
  // An import error, or an exception of the script: where workers meet cannot matter.
  f.stderr_tail = {"ModuleNotFoundError: No module named 'torch'"};
  EXPECT_THAT(Summary({f}, "train.py", meeting), Not(HasSubstr("Workers meet at")));
  f.stderr_tail = {};
  f.hung = true;
  EXPECT_THAT(Summary({f}, "train.py", meeting), HasSubstr("Workers meet at"));
}

TEST(FailedForALostPeerTest, ReadsGlooNcclAndSocketErrors) {
  WorkerFailure f = Failure(1, kT0, Exited(1));
  EXPECT_FALSE(FailedForALostPeer(f));
  for (const char* line :
       {"RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed "
        "by peer [127.0.0.1]:4217",
        "RuntimeError: [gloo/transport/tcp/pair.cc:534] Read error [10.0.0.2]:2941: Connection "
        "reset by peer",
        "torch.distributed.DistBackendError: NCCL error: remote process exited or there was a "
        "network error, NCCL version 2.28.3",
        "ncclRemoteError: A call failed possibly due to a network error or a remote process "
        "exiting prematurely."}) {
    f.stderr_tail = {"Traceback (most recent call last):", line};
    EXPECT_TRUE(FailedForALostPeer(f)) << line;
  }
  f.stderr_tail = {"ValueError: bad batch"};
  EXPECT_FALSE(FailedForALostPeer(f));
  // A retry it logged earlier, then an error of its own: its own.
  f.stderr_tail = {"WARNING: Connection reset by peer, retrying",
                   "step 7",
                   "step 8",
                   "Traceback (most recent call last):",
                   "  File \"t.py\", line 9",
                   "ValueError: bad batch"};
  EXPECT_FALSE(FailedForALostPeer(f));
  // NCCL's message spans lines after the exception's name.
  f.stderr_tail = {"Traceback (most recent call last):", "  File \"t.py\", line 9",
                   "torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:219, "
                   "unhandled system error",
                   "Last error:", "socketProgress: Connection closed by remote peer 10.0.0.2"};
  EXPECT_TRUE(FailedForALostPeer(f));
  f.stderr_tail = {};
  f.error_message = "Connection closed by peer";  // from the error file
  EXPECT_TRUE(FailedForALostPeer(f));
}

TEST(RaisedAnExceptionTest, ATracebackEndingInAnExceptionLine) {
  WorkerFailure f = Failure(0, kT0, Killed(SIGTERM));
  f.stderr_tail = {"step 6",
                   "Traceback (most recent call last):",
                   "  File \"t.py\", line 9",
                   "    raise ValueError(\"bad batch\")",
                   "ValueError: bad batch",
                   ""};
  EXPECT_TRUE(RaisedAnException(f));
  f.stderr_tail = {"Traceback (most recent call last):", "  File \"t.py\", line 9",
                   "KeyboardInterrupt"};
  EXPECT_FALSE(RaisedAnException(f)) << "Ctrl-C, forwarded: not a failure of its own";
  f.stderr_tail = {"step 6", "step 7"};
  EXPECT_FALSE(RaisedAnException(f));
  f.stderr_tail = {"Traceback (most recent call last):", "  File \"t.py\", line 9"};
  EXPECT_FALSE(RaisedAnException(f)) << "cut off before its last line";
  // logging.exception(...): a traceback it handled, and the job went on.
  f.stderr_tail = {"ERROR:root:retrying",
                   "Traceback (most recent call last):", "  File \"t.py\", line 9", "OSError: busy",
                   "INFO:root:step 120"};
  EXPECT_FALSE(RaisedAnException(f));
  // Chained: the last traceback's exception is the one that ended it.
  f.stderr_tail = {"Traceback (most recent call last):",
                   "  File \"t.py\", line 3",
                   "OSError: busy",
                   "",
                   "During handling of the above exception, another exception occurred:",
                   "",
                   "Traceback (most recent call last):",
                   "  File \"t.py\", line 5",
                   "RuntimeError: gave up"};
  EXPECT_TRUE(RaisedAnException(f));
}

TEST(FormatFailureSummaryTest, AWorkerThatRaisedBeforeTheStopEndedItSaysSo) {
  WorkerFailure f = Failure(0, kT0, Exited(1));
  f.stopped_by = SIGTERM;
  EXPECT_THAT(Summary({f}), HasSubstr("exitcode  : 1 (pid: 1000; it raised, then the stop's "
                                      "SIGTERM ended it as it shut down)"));
}

// On a loaded host the rank whose peer raised can be reaped first: it is not the cause.
TEST(RootCauseIndexTest, ARankThatFailedOnItsOwnComesBeforeOneThatLostAPeer) {
  WorkerFailure lost = Failure(1, kT0, Exited(1));
  lost.stderr_tail = {"RuntimeError: [pair.cc:598] Connection closed by peer [127.0.0.1]:4217"};
  WorkerFailure raised = Failure(0, kT0 + absl::Milliseconds(40), Exited(1));
  raised.stderr_tail = {"ValueError: bad batch"};
  EXPECT_EQ(RootCauseIndex({lost, raised}), 1u);
  // When every failure lost a peer, the earliest stands.
  WorkerFailure lost_later = lost;
  lost_later.time = kT0 + absl::Seconds(1);
  EXPECT_EQ(RootCauseIndex({lost_later, lost}), 1u);

  const std::string text = Summary({lost, raised});
  EXPECT_THAT(text, HasSubstr("Root Cause (first rank that failed on its own):"));
  EXPECT_THAT(text, Not(HasSubstr("<NO_OTHER_FAILURES>")));
  EXPECT_LT(text.find("cause     : a peer went away"), text.find("Root Cause"));
  EXPECT_GT(text.find("ValueError: bad batch"), text.find("Root Cause"));
}

TEST(FormatFailureSummaryTest, NamesThePythonAndHowToChooseAnotherForAMissingModule) {
  WorkerFailure f = Failure(0, kT0, Exited(1));
  f.stderr_tail = {"Traceback (most recent call last):", "  File \"t.py\", line 1, in <module>",
                   "ModuleNotFoundError: No module named 'torch'"};
  SummaryContext context;
  context.entrypoint = "t.py";
  context.interpreter = {"/opt/venv/bin/python3", "python3 first on PATH"};
  const std::string text = FormatFailureSummary({f}, context);
  EXPECT_THAT(text, HasSubstr("Python: /opt/venv/bin/python3 (python3 first on PATH)\n"));
  EXPECT_THAT(text, HasSubstr("rank 0: no module 'torch' in /opt/venv/bin/python3: set "
                              "PYTHON_EXEC to the Python that has it"));
  // Chosen with PYTHON_EXEC already: install it there, or choose another.
  context.interpreter = {"/opt/venv/bin/python3", "PYTHON_EXEC"};
  EXPECT_THAT(FormatFailureSummary({f}, context),
              HasSubstr("rank 0: no module 'torch' in /opt/venv/bin/python3 (PYTHON_EXEC): install "
                        "it for that Python, or set PYTHON_EXEC to one that has it"));
  // A module of the user's own, misspelled: no other interpreter would have it.
  f.stderr_tail = {"ModuleNotFoundError: No module named 'modle'"};
  context.modules_beside_script = {"train", "model", "data"};
  const std::string misspelled = FormatFailureSummary({f}, context);
  EXPECT_THAT(misspelled, HasSubstr("rank 0: no module 'modle' in /opt/venv/bin/python3; the "
                                    "script's folder has 'model': a misspelling?\n"));
  EXPECT_THAT(misspelled, Not(HasSubstr("set PYTHON_EXEC")));
  context.interpreter = {"/opt/venv/bin/python3", "python3 first on PATH"};
  f.stderr_tail = {"ModuleNotFoundError: No module named 'torch'"};
  f.stderr_tail = {"ValueError: bad batch"};
  EXPECT_THAT(FormatFailureSummary({f}, context), Not(HasSubstr("which has no module")));
  context.interpreter = {};  // --no-python: no Python to name
  EXPECT_THAT(FormatFailureSummary({f}, context), Not(HasSubstr("Python:")));
}

// A job stopped while its workers hung (they could not reach each other): the summary
// names what they were given.
TEST(FormatStopSummaryTest, NamesTheSignalTheRanksAndWhereTheyMeet) {
  const std::string text =
      FormatStopSummary("train.py", SIGTERM, "node2", 2, 3, MeetingPoint{"10.0.0.1", 29500});
  EXPECT_THAT(text, HasSubstr("train.py STOPPED by SIGTERM\n"));
  EXPECT_THAT(text, HasSubstr("Stopped while running: ranks 2-3 on node2\n"));
  EXPECT_THAT(text, HasSubstr("MASTER_ADDR=10.0.0.1 MASTER_PORT=29500"));
  EXPECT_THAT(FormatStopSummary("x", SIGINT, "h", 0, 0, {}), HasSubstr("rank 0 on h"));
}

TEST(ReportedFailuresTest, WhatTheRendezvousIsToldOfEachFailure) {
  WorkerFailure crashed = Failure(2, kT0, Killed(SIGSEGV));
  crashed.stderr_tail = {"first line", "Segmentation fault"};
  WorkerFailure raised = Failure(3, kT0, Exited(1));
  raised.error_message = std::string(20 * 1024, 'x');
  WorkerFailure hung = Failure(4, kT0, 0);
  hung.hung = true;
  hung.ends_with = SIGABRT;  // taken for hung, not ended yet
  hung.error_message = "rank 4 sent no heartbeat for 3s";
  std::vector<ReportedFailure> reported = ReportedFailures({crashed, raised, hung});
  ASSERT_EQ(reported.size(), 3u);
  EXPECT_EQ(reported[0].exit_code, -SIGSEGV);
  EXPECT_EQ(reported[0].message, "Segmentation fault") << "no error file: the tail's last line";
  EXPECT_EQ(reported[1].exit_code, 1);
  EXPECT_THAT(reported[1].message, HasSubstr("(cut at 16 KiB)"));
  EXPECT_LT(reported[1].message.size(), 17u * 1024);
  EXPECT_EQ(reported[2].exit_code, -SIGABRT) << "the signal that will end it";
  EXPECT_TRUE(reported[2].hung);
}

TEST(FormatExclusionsTest, EachNodeOnALineOfItsOwn) {
  EXPECT_EQ(FormatExclusions({}), "");
  EXPECT_EQ(FormatExclusions({"node3: its health check failed:\nno GPU"}),
            "ddprun: the job kept 1 node out (docs/node-health.md):\n"
            "  node3: its health check failed:\n    no GPU\n");
}

}  // namespace
}  // namespace ddprun
