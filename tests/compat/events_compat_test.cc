// ddprun's events (--event-log-handler) read by torch's own event classes, from Debian's
// python3-torch: every line deserializes and serializes back to the same bytes, and the
// events come in torchrun's order with its fields.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The event file read by torch's own classes (check_events.py): a line per event.
ProcessResult ReadWithTorch(const std::string& events) {
  return RunProcess({"/usr/bin/python3", kSourceDir + "/tests/compat/check_events.py", events});
}

TEST(EventsCompat, TorchsEventClassesReadEveryLineOfARestartedJob) {
  TempDir dir;
  const std::string events = dir.path() + "/events.jsonl";
  ProcessResult job =
      RunProcess(DdprunWithTestWorker({"--nproc-per-node=2", "--max-restarts=1", "--rdzv-id=ev",
                                       "--event-log-handler=file:" + events},
                                      {"crash-once", "1", "3", dir.path()}));
  ASSERT_EQ(job.exit_code, 0) << job.err;
  ProcessResult read = ReadWithTorch(events);
  ASSERT_EQ(read.exit_code, 0) << read.err;
  std::vector<std::string> lines = absl::StrSplit(read.out, '\n', absl::SkipEmpty());
  // name source global_rank state agent_restarts round exit_code has_raw_error
  EXPECT_THAT(
      lines,
      ElementsAre("torchelastic.worker.status.RENDEZVOUS AGENT None RENDEZVOUS 0 None - False",
                  "torchelastic.worker.status.ASSIGN_WORKER_RANKS AGENT None ASSIGN_WORKER_RANKS 0 "
                  "None - False",
                  "torchelastic.worker.status.START WORKER 0 START 0 0 None False",
                  "torchelastic.worker.status.START WORKER 1 START 0 0 None False",
                  "torchelastic.worker.status.RENDEZVOUS AGENT None RENDEZVOUS 0 0 - False",
                  "torchelastic.worker.status.ASSIGN_WORKER_RANKS AGENT None ASSIGN_WORKER_RANKS 0 "
                  "0 - False",
                  "torchelastic.worker.status.START WORKER 0 START 1 1 None False",
                  "torchelastic.worker.status.START WORKER 1 START 1 1 None False",
                  "torchelastic.worker.status.RESTARTED AGENT None RESTARTED 1 1 - False",
                  "torchelastic.worker.status.SUCCEEDED WORKER 0 SUCCEEDED 1 1 None False",
                  "torchelastic.worker.status.SUCCEEDED WORKER 1 SUCCEEDED 1 1 None False",
                  "torchelastic.worker.status.SUCCEEDED AGENT None SUCCEEDED 1 1 - False"));
}

TEST(EventsCompat, AFailedRunEndsWithTheFailedWorkersExitCodeAndTheOthersTerminated) {
  TempDir dir;
  const std::string events = dir.path() + "/events.jsonl";
  ProcessResult job =
      RunProcess(DdprunWithTestWorker({"--nproc-per-node=2", "--event-log-handler=file:" + events},
                                      {"crash-once", "1", "3", dir.path()}));
  ASSERT_EQ(job.exit_code, 3) << job.err;
  ProcessResult read = ReadWithTorch(events);
  ASSERT_EQ(read.exit_code, 0) << read.err;
  std::vector<std::string> lines = absl::StrSplit(read.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 7u) << read.out;
  // Every event at the run's end carries ddprun's root cause across the job.
  EXPECT_THAT(lines[4], StartsWith("torchelastic.worker.status.TERMINATED WORKER 0 TERMINATED 0 0 "
                                   "None False rank 1 on "));
  EXPECT_THAT(lines[5], StartsWith("torchelastic.worker.status.FAILED WORKER 1 FAILED 0 0 3 True "
                                   "rank 1 on "));
  EXPECT_THAT(lines[5], HasSubstr("rank 1: simulated crash"));  // the worker's own last line
  // The agent's own run ended, whatever its workers did: SUCCEEDED, as torchrun's.
  EXPECT_THAT(lines[6], StartsWith("torchelastic.worker.status.SUCCEEDED AGENT None SUCCEEDED 0 "
                                   "0 - False rank 1 on "));
  EXPECT_THAT(lines[6], HasSubstr(" failed (exitcode 3)"));
}

TEST(EventsCompat, TheConsoleHandlerWritesTheSameLinesToStderr) {
  TempDir dir;
  ProcessResult job = RunProcess(
      DdprunWithTestWorker({"--nproc-per-node=1", "--event-log-handler=console"}, {"exit", "0"}));
  ASSERT_EQ(job.exit_code, 0) << job.err;
  EXPECT_THAT(job.err, HasSubstr("\n{\"name\": \"torchelastic.worker.status.START\", "
                                 "\"source\": \"WORKER\", \"timestamp\": 0, \"metadata\": {"));
  ProcessResult quiet = RunProcess(DdprunWithTestWorker({"--nproc-per-node=1"}, {"exit", "0"}));
  EXPECT_THAT(quiet.err, ::testing::Not(HasSubstr("torchelastic.worker.status")));  // null
}

// Two agents of one job write one file: every line whole, every rank's events there once.
TEST(EventsCompat, TwoAgentsShareOneFileLineByLine) {
  TempDir dir;
  const std::string events = dir.path() + "/events.jsonl";
  const std::string endpoint = absl::StrCat("127.0.0.1:", FreeLoopbackPort());
  std::vector<std::unique_ptr<ChildProcess>> agents;
  for (int node = 1; node <= 2; ++node) {
    agents.push_back(ChildProcess::Start(DdprunWithTestWorker(
        {"--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d", "--rdzv-endpoint=" + endpoint,
         "--rdzv-id=shared", "--event-log-handler=file:" + events},
        {"exit", "0"})));
  }
  for (auto& agent : agents) {
    ProcessResult r = agent->Wait(absl::Seconds(60));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  ProcessResult read = ReadWithTorch(events);
  ASSERT_EQ(read.exit_code, 0) << read.err;
  for (int rank = 0; rank < 4; ++rank) {
    for (const char* state : {"START", "SUCCEEDED"}) {
      EXPECT_EQ(CountLinesContaining(read.out, absl::StrCat(".", state, " WORKER ", rank, " ")), 1)
          << state << " of rank " << rank << " in\n"
          << read.out;
    }
  }
  EXPECT_EQ(CountLinesContaining(read.out, ".SUCCEEDED AGENT "), 2) << read.out;
}

}  // namespace
}  // namespace ddprun::testing
