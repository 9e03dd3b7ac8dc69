// ElasticRecords: the torchelastic records an agent writes, at torchrun's moments, read back
// from a file handler as a log pipeline would.
#include "agent/elastic_records.h"

#include <sys/wait.h>

#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ElasticRecordsTest : public ::testing::Test {
 protected:
  ElasticRecords Make() {
    RecordLogSettings settings;
    settings.kind = RecordLogSettings::Kind::kFile;
    settings.path = dir_ / "records.jsonl";
    absl::StatusOr<RecordLog> log = RecordLog::Open(settings);
    EXPECT_TRUE(log.ok()) << log.status();
    return ElasticRecords(std::move(*log), {"job", "trainer", "node0", "c10d", "train.py"}, t0_);
  }
  std::vector<std::string> Lines() const {
    std::ifstream in(dir_ / "records.jsonl");
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
  static Assignment Round() {
    Assignment a;
    a.round = 2;
    a.group_rank = 1;
    a.group_world_size = 2;
    a.world_size = 4;
    a.restart_count = 1;
    return a;
  }
  static std::vector<WorkerSupervisor::Outcome> Workers(WorkerSupervisor::WorkerState rank2,
                                                        WorkerSupervisor::WorkerState rank3) {
    return {{0, 2, 100, rank2, rank2 == WorkerSupervisor::WorkerState::kFailed ? 3 << 8 : 0},
            {1, 3, 101, rank3, 0}};
  }

  testing::TempDir dir_;
  absl::Time t0_ = absl::FromUnixSeconds(1000);
};

TEST_F(ElasticRecordsTest, ARoundAndItsWorkersAreRecordedWithTheirDurations) {
  ElasticRecords records = Make();
  records.JoinSent(t0_);
  records.RoundAssigned(Round(), t0_ + absl::Milliseconds(50), t0_ + absl::Milliseconds(60));
  records.WorkersStarted(
      Workers(WorkerSupervisor::WorkerState::kRunning, WorkerSupervisor::WorkerState::kRunning));
  std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[0], AllOf(HasSubstr("status.RENDEZVOUS\", \"source"),
                              HasSubstr("\"duration_ms\": 50.0"), HasSubstr("\"round\": null")))
      << "as torch's: made before the round is known";
  EXPECT_THAT(lines[1], AllOf(HasSubstr("status.ASSIGN_WORKER_RANKS\", \"source"),
                              HasSubstr("\"duration_ms\": 10.0")));
  EXPECT_THAT(lines[2],
              AllOf(HasSubstr("status.START\", \"source"), HasSubstr("\"global_rank\": 2"),
                    HasSubstr("\"round\": 2"), HasSubstr("\"worker_id\": \"100\"")));
  EXPECT_THAT(lines[3], HasSubstr("\"global_rank\": 3"));
}

TEST_F(ElasticRecordsTest, AtTheRunsEndEachWorkersFinalStateThenTheAgentsSuccess) {
  ElasticRecords records = Make();
  records.RoundAssigned(Round(), t0_, t0_);
  WorkerFailure failure;
  failure.rank = 2;
  failure.error_file = "/logs/error.json";
  failure.error_message = "ValueError: bad batch";
  records.AttemptClosed(
      Workers(WorkerSupervisor::WorkerState::kFailed, WorkerSupervisor::WorkerState::kStopped),
      {failure});
  ReportedFailure root;
  root.host = "node0";
  root.rank = 2;
  root.exit_code = 3;
  root.message = "ValueError: bad batch";
  RunEnd end{RunOutcome::kFailed, "restart budget spent", {root}, {"node9: kept out"}};
  records.AgentExiting(end, 3, t0_ + absl::Seconds(42));
  std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_THAT(lines[2],
              AllOf(HasSubstr("status.FAILED\", \"source"), HasSubstr("\"global_rank\": 2"),
                    HasSubstr("ValueError: bad batch"), HasSubstr("\\\"exit_code\\\": [3]")));
  EXPECT_THAT(lines[3],
              AllOf(HasSubstr("status.TERMINATED\", \"source"), HasSubstr("\"global_rank\": 3")));
  EXPECT_THAT(lines[4],
              AllOf(HasSubstr("status.SUCCEEDED\", \"source"), HasSubstr("\"source\": \"AGENT\""),
                    HasSubstr("\"total_run_time\": 42"),
                    HasSubstr("rank 2 on node0 failed (exitcode 3): ValueError: bad batch"),
                    HasSubstr("\"excluded\": \"node9: kept out\"")));
}

TEST_F(ElasticRecordsTest, AnAgentThatExitsBeforeTheRunEndedRecordsFailed) {
  ElasticRecords records = Make();
  records.AgentExiting(std::nullopt, 143, t0_);
  EXPECT_THAT(Lines(), ElementsAre(AllOf(HasSubstr("status.FAILED\", \"source"),
                                         HasSubstr("the agent exited 143 before the run ended"))));
}

// A restart's split: its total as duration_ms, each part in ms, null where not seen here.
TEST_F(ElasticRecordsTest, ARestartsSplitIsRecordedPartByPart) {
  ElasticRecords records = Make();
  records.RoundAssigned(Round(), t0_, t0_);
  RestartSplit split;
  split.round = 2;
  split.restart_count = 1;
  split.stop = absl::Milliseconds(40);
  split.rendezvous = absl::Milliseconds(2);
  split.spawn = absl::Microseconds(30500);
  split.total = absl::Microseconds(72500);
  records.RestartExplained(split);
  ASSERT_EQ(Lines().size(), 3u);
  EXPECT_THAT(Lines()[2],
              AllOf(HasSubstr("\"name\": \"torchelastic.worker.status.RESTARTED\", \"source\": "
                              "\"AGENT\""),
                    HasSubstr("\"agent_restarts\": 1, \"duration_ms\": 72.5, \"round\": 2, "),
                    HasSubstr("\"excluded\": null, \"detection_ms\": null, \"stop_ms\": 40.0, "
                              "\"rendezvous_ms\": 2.0, \"spawn_ms\": 30.5, \"connected_ms\": "
                              "null, \"barrier_ms\": null}}")));
}

TEST_F(ElasticRecordsTest, AMasterOutageIsRecordedWithItsLength) {
  ElasticRecords records = Make();
  records.RoundAssigned(Round(), t0_, t0_);
  records.MasterBack(2, absl::Milliseconds(3250));
  ASSERT_EQ(Lines().size(), 3u);
  EXPECT_THAT(Lines()[2],
              AllOf(HasSubstr("\"name\": \"torchelastic.worker.status.RESUMED\", \"source\": "
                              "\"AGENT\""),
                    HasSubstr("\"duration_ms\": 3250.0, \"round\": 2, ")));
}

}  // namespace
}  // namespace ddprun
