// WorkerMetrics: the snapshot an agent's --metrics-port shows, from what it was told.
#include "agent/worker_metrics.h"

#include <signal.h>
#include <sys/wait.h>

#include "gtest/gtest.h"

namespace ddprun {
namespace {

using State = WorkerSupervisor::WorkerState;

WorkerSupervisor::Outcome Worker(int rank, State state, int wait_status = 0) {
  return {rank, rank, 100 + rank, state, wait_status};
}

TEST(WorkerMetricsTest, NothingIsPublishedWithoutABoard) {
  WorkerMetrics metrics("job");
  metrics.Publish(std::nullopt, std::nullopt);  // no board: nothing to do, nothing to crash
  EXPECT_FALSE(metrics.publishing());
  AgentMetricsBoard board;
  metrics.PublishTo(&board);
  EXPECT_TRUE(metrics.publishing());
  metrics.Publish(std::nullopt, std::nullopt);
  EXPECT_EQ(board.Read().run_id, "job");
  EXPECT_EQ(board.Read().round, -1);
}

TEST(WorkerMetricsTest, StatesStartsAndExitsByCause) {
  WorkerMetrics metrics("job");
  AgentMetricsBoard board;
  metrics.PublishTo(&board);
  Assignment round;
  round.round = 3;
  round.restart_count = 2;
  metrics.WorkersStarted(4);
  metrics.Publish(round, std::vector<WorkerSupervisor::Outcome>{
                             Worker(0, State::kRunning), Worker(1, State::kFrozen),
                             Worker(2, State::kHung), Worker(3, State::kRunning)});
  AgentMetricsSnapshot now = board.Read();
  EXPECT_EQ(now.round, 3);
  EXPECT_EQ(now.restart_count, 2);
  EXPECT_EQ(now.worker_starts, 4);
  EXPECT_EQ(now.workers["running"], 2);
  EXPECT_EQ(now.workers["frozen"], 1);
  EXPECT_EQ(now.workers["hung"], 1);

  WorkerFailure hung;
  hung.rank = 2;
  hung.hung = true;
  metrics.AttemptClosed({Worker(0, State::kSucceeded), Worker(1, State::kStopped),
                         Worker(2, State::kFailed, SIGKILL), Worker(3, State::kFailed, 3 << 8)},
                        {hung});
  metrics.Publish(round, std::nullopt);  // between attempts: the last attempt's workers
  AgentMetricsSnapshot after = board.Read();
  EXPECT_EQ(after.workers["succeeded"], 1);
  EXPECT_EQ(after.workers["failed"], 2);
  EXPECT_EQ(after.workers["running"], 0);
  using Cause = std::pair<std::string, std::string>;
  EXPECT_EQ(after.worker_exits[Cause("exit_code", "0")], 1);
  EXPECT_EQ(after.worker_exits[Cause("stopped", "")], 1);
  EXPECT_EQ(after.worker_exits[Cause("hang", "")], 1) << "taken for hung, not SIGKILL";
  EXPECT_EQ(after.worker_exits[Cause("exit_code", "3")], 1);
}

// Each part of a restart goes into its own histogram, a value on a bound into that bound's
// bucket (Prometheus's `le`), and the total into "total".
TEST(WorkerMetricsRestarts, EachPartOfARestartIsCountedInItsHistogram) {
  WorkerMetrics metrics("job");
  AgentMetricsBoard board;
  metrics.PublishTo(&board);
  RestartSplit split;
  split.stop = absl::Milliseconds(10);  // on the 0.01 s bound
  split.spawn = absl::Seconds(120);     // above every bound
  split.total = absl::Milliseconds(130);
  metrics.RestartExplained(split);
  metrics.RestartExplained(split);
  metrics.Publish(std::nullopt, std::nullopt);
  const AgentMetricsSnapshot seen = board.Read();
  ASSERT_EQ(seen.restart_parts.size(), 3u);
  const DurationHistogram& stop = seen.restart_parts.at("stop");
  EXPECT_EQ(stop.count, 2u);
  EXPECT_DOUBLE_EQ(stop.sum, 0.02);
  EXPECT_EQ(stop.buckets[2], 2u) << "0.01 s is in the bucket whose bound is 0.01";
  EXPECT_EQ(seen.restart_parts.at("spawn").buckets.back(), 2u);
  EXPECT_EQ(seen.restart_parts.at("total").buckets[6], 2u) << "0.13 s: the 0.25 s bucket";
  EXPECT_EQ(seen.restart_parts.count("detection"), 0u) << "not seen: no series";
}

}  // namespace
}  // namespace ddprun
