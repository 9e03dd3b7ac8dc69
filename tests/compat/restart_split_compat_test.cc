// Every restart explained, for a user's own PyTorch job and without code in it: two agents
// (c10d on loopback) run restart_split_job.py, whose rank 1 exits after its first
// all-reduce. Group rank 0's agent serves the workers' store and sees the whole split, down
// to every rank connected to the store and past its barrier; the other sees the stop, the
// rendezvous and the spawn. Each says it in one line, an event record and its metrics, and
// the master keeps the longest of each part in the run's round table (`ddprun status`, the
// status page's /api/v1/status). The second agent is told it does not host the master
// (is_host=0), so that the test knows whose --metrics-port serves the status.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "absl/strings/str_cat.h"
#include "tests/compat/compat_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/ddprun_paths.h"
#include "tests/support/http_get.h"

namespace ddprun::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kParts[] = R"(detection \d+ ms, stop \d+ ms, rendezvous \d+ ms, spawn \d+ ms)";
constexpr char kStoreParts[] = R"(, every rank connected to the store \d+ ms)";
constexpr char kBarrier[] = R"(, store barrier passed \d+ ms)";

struct SplitRun {
  ProcessResult host, other;  // group rank 0's agent (the first to join), and the other's
  std::string host_records, other_records;
  std::string host_metrics;  // scraped while attempt 1 ran
  std::string status_json;   // /api/v1/status once round 1's restart is in the round table
  ProcessResult status;      // `ddprun status --rdzv-id=split` then
};

SplitRun RunCrashingJob(const std::string& python,
                        std::map<std::string, std::optional<std::string>> env) {
  env["PYTHON_EXEC"] = python;
  TempDir out;
  const int metrics_port = FreeLoopbackPort();
  const std::string endpoint = absl::StrCat("--rdzv-endpoint=127.0.0.1:", FreeLoopbackPort());
  std::vector<std::unique_ptr<ChildProcess>> agents;
  for (int node = 0; node < 2; ++node) {
    std::vector<std::string> argv = {
        kDdprun,
        "--nnodes=2",
        "--nproc-per-node=2",
        "--rdzv-backend=c10d",
        endpoint,
        "--rdzv-id=split",
        "--max-restarts=1",
        "--node-rank",
        absl::StrCat(node),
        absl::StrCat("--event-log-handler=file:", out / "records.", node)};
    argv.push_back(node == 0 ? absl::StrCat("--metrics-port=", metrics_port)
                             : "--rdzv-conf=is_host=0");
    argv.insert(argv.end(), {kCompatDir + "/restart_split_job.py", out.path()});
    agents.push_back(ChildProcess::Start(argv, env));
  }
  SplitRun run;
  EXPECT_TRUE(WaitUntil(
      [&] {
        for (int rank = 0; rank < 4; ++rank) {
          if (!FileExists(out / absl::StrCat("running.", rank))) return false;
        }
        return true;
      },
      absl::Seconds(180)))
      << agents[0]->ErrSoFar() << agents[1]->ErrSoFar();
  // Every rank runs attempt 1: group rank 0's agent has seen them all past the store.
  run.host_metrics = HttpGet(metrics_port, "/metrics").body;
  // Its split reaches the master a moment later, on its session.
  EXPECT_TRUE(WaitUntil(
      [&] {
        run.status_json = HttpGet(metrics_port, "/api/v1/status?run_id=split").body;
        return run.status_json.find("\"connected\"") != std::string::npos;
      },
      absl::Seconds(30)))
      << run.status_json;
  run.status = RunProcess({kDdprun, "status", "--rdzv-id=split", endpoint}, {}, absl::Seconds(30));
  out.Write("go", "");
  run.host = agents[0]->Wait(absl::Seconds(120));
  run.other = agents[1]->Wait(absl::Seconds(120));
  EXPECT_EQ(run.host.exit_code, 0) << run.host.err;
  EXPECT_EQ(run.other.exit_code, 0) << run.other.err;
  run.host_records = ReadFile(out / "records.0");
  run.other_records = ReadFile(out / "records.1");
  return run;
}

int CountMatches(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// torch 1.13 passes the store barrier in init_process_group: group rank 0's agent sees it.
TEST(RestartSplitCompat, EveryPartOfARestartIsSaidInTheLogTheRecordsAndTheMetrics) {
  SplitRun run = RunCrashingJob(kPython, {});
  const std::string head = R"(restart 1 \(round 1\) took \d+ ms on this node: )";
  EXPECT_EQ(CountMatches(run.host.err, head + kParts + kStoreParts + kBarrier + "\n"), 1)
      << run.host.err;
  // The other node's workers did not fail: its restart begins with the stop order; it serves
  // no store, and says its line ends at the workers' start.
  EXPECT_EQ(CountMatches(run.other.err, head + R"(stop \d+ ms, rendezvous \d+ ms, spawn \d+ ms )"
                                               R"(\(to the workers' start only: .*\)\n)"),
            1)
      << run.other.err;

  EXPECT_EQ(CountMatches(run.host_records, R"("state": "RESTARTED")"), 1) << run.host_records;
  EXPECT_EQ(CountMatches(run.host_records,
                         R"("agent_restarts": 1, "duration_ms": [0-9.]+, "round": 1, )"
                         R"("root_cause": null, "excluded": null, "detection_ms": [0-9.]+, )"
                         R"("stop_ms": [0-9.]+, "rendezvous_ms": [0-9.]+, "spawn_ms": [0-9.]+, )"
                         R"("connected_ms": [0-9.]+, "barrier_ms": [0-9.]+\}\})"),
            1)
      << run.host_records;
  EXPECT_EQ(CountMatches(run.other_records,
                         R"("detection_ms": null, "stop_ms": [0-9.]+, "rendezvous_ms": [0-9.]+, )"
                         R"("spawn_ms": [0-9.]+, "connected_ms": null, "barrier_ms": null\}\})"),
            1)
      << run.other_records;

  for (const char* part :
       {"detection", "stop", "rendezvous", "spawn", "connected", "barrier", "total"}) {
    EXPECT_THAT(run.host_metrics,
                HasSubstr(absl::StrCat(
                    "ddprun_agent_restart_seconds_count{run_id=\"split\",part=\"", part, "\"} 1")))
        << run.host_metrics;
  }
  EXPECT_THAT(run.host_metrics,
              HasSubstr("ddprun_agent_restart_seconds_bucket{run_id=\"split\",part=\"total\","
                        "le=\"+Inf\"} 1"));

  // The round table: round 1's restart, each part the longest any node said.
  EXPECT_EQ(CountMatches(run.status_json, R"("restart_ms":\{("[a-z]+":[0-9.e+-]+,?){7}\})"), 1)
      << run.status_json;
  for (const char* part :
       {"detection", "stop", "rendezvous", "spawn", "connected", "barrier", "total"}) {
    EXPECT_THAT(run.status_json, HasSubstr(absl::StrCat("\"", part, "\":"))) << part;
  }
  ASSERT_EQ(run.status.exit_code, 0) << run.status.err;
  EXPECT_THAT(run.status.out, HasSubstr("RESTARTED IN"));
  EXPECT_EQ(CountMatches(run.status.out, R"([0-9.]+m?s \([a-z]+ [0-9.]+m?s\))"), 1)
      << "round 1's restart and its longest part: " << run.status.out;
}

class Torch2RestartSplit : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = WhyNoTorch2(); !why.empty()) GTEST_SKIP() << why;
  }
};

// torch 2.1 and later pass no store barrier unless asked: the split ends once every rank is
// on the store, and says no barrier; asked, they pass one, and it is said.
TEST_F(Torch2RestartSplit, TheBarrierIsSaidOnlyWhereTheWorkersPassOne) {
  SplitRun plain = RunCrashingJob(kTorch2Python, {});
  const std::string head = R"(restart 1 \(round 1\) took \d+ ms on this node: )";
  EXPECT_EQ(CountMatches(plain.host.err, head + kParts + kStoreParts + "\n"), 1) << plain.host.err;
  EXPECT_THAT(plain.host.err, Not(HasSubstr("store barrier passed")));

  SplitRun asked = RunCrashingJob(kTorch2Python, {{"TORCH_DIST_INIT_BARRIER", "1"}});
  EXPECT_EQ(CountMatches(asked.host.err, head + kParts + kStoreParts + kBarrier + "\n"), 1)
      << asked.host.err;
}

}  // namespace
}  // namespace ddprun::testing
