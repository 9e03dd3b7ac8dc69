// The status of a run (run_status.h) and the metrics read from it (master_metrics.h), from a
// RoundStateMachine driven with a fake clock.

#include "observability/run_status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "observability/master_metrics.h"
#include "prometheus/text_serializer.h"
#include "tests/support/proved_round.h"

namespace ddprun {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class RunStatusTest : public ::testing::Test {
 protected:
  RunStatusTest() {
    settings_.min_nodes = 2;
    settings_.max_nodes = 2;
    settings_.max_restarts = 3;
    settings_.node_health.max_node_failures = 1;
    settings_.node_health.node_cooldown = absl::Seconds(60);
    rounds_ = std::make_unique<RoundStateMachine>(settings_, now_);
  }
  static NodeInfo Node(const std::string& host) {
    NodeInfo n;
    n.host = host;
    n.addr = host;
    n.pid = 7;
    n.incarnation = "agent-" + host;
    n.local_world_size = 2;
    return n;
  }
  v1::RunStatus Status() { return RunStatusOf("job", *rounds_, {now_, wall_ + (now_ - start_)}); }

  RendezvousSettings settings_;
  const absl::Time start_ = absl::FromUnixSeconds(1000);
  absl::Time now_ = start_;
  const absl::Time wall_ = absl::FromUnixSeconds(1'800'000'000);
  std::unique_ptr<RoundStateMachine> rounds_;
};

TEST_F(RunStatusTest, ARunningRoundShowsItsNodesInGroupRankOrder) {
  ASSERT_TRUE(rounds_->Join(1, Node("b"), now_).ok());
  ASSERT_TRUE(rounds_->Join(2, Node("a"), now_).ok());
  now_ += absl::Seconds(2);
  const v1::RunStatus s = Status();
  EXPECT_EQ(s.state(), "running");
  EXPECT_EQ(s.round(), 0);
  EXPECT_EQ(s.world_size(), 4);
  EXPECT_EQ(s.restarts_left(), 3);
  ASSERT_EQ(s.nodes_size(), 2);
  EXPECT_EQ(s.nodes(0).host(), "a");
  EXPECT_EQ(s.nodes(1).first_rank(), 2);
  EXPECT_EQ(s.nodes(1).state(), "running");
  EXPECT_DOUBLE_EQ(s.nodes(1).last_heartbeat_s_ago(), 2);
  ASSERT_EQ(s.rounds_size(), 1);
  EXPECT_DOUBLE_EQ(s.rounds(0).began_unix_s(), 1'800'000'000);
  EXPECT_EQ(s.rounds(0).ended_unix_s(), 0);
  EXPECT_FALSE(s.has_last_failure());
  EXPECT_EQ(s.settings().at("max_restarts"), "3");
  EXPECT_EQ(s.settings().at("node_cooldown"), "1m");
  EXPECT_EQ(s.settings_size(), static_cast<int>(SettingsAsText(settings_).size()))
      << "every setting of the table is shown";
}

TEST_F(RunStatusTest, AFailureIsTheLastFailureAndEndsItsRoundInTheRecord) {
  ASSERT_TRUE(rounds_->Join(1, Node("a"), now_).ok());
  ASSERT_TRUE(rounds_->Join(2, Node("b"), now_).ok());
  now_ += absl::Seconds(10);
  ReportedFailure f;
  f.rank = 3;
  f.exit_code = -11;
  f.time = absl::FromUnixSeconds(1'800'000'010);
  f.message = "Segmentation fault";
  rounds_->ReportFailure(2, 0, {f}, now_);
  ASSERT_TRUE(rounds_->Join(1, Node("a"), now_).ok());
  const v1::RunStatus s = Status();
  EXPECT_EQ(s.restarts_used(), 1);
  EXPECT_EQ(s.last_failure().host(), "b");
  EXPECT_EQ(s.last_failure().local_rank(), 1);
  EXPECT_EQ(s.last_failure().exit(), "SIGSEGV");
  ASSERT_EQ(s.rounds_size(), 1);
  EXPECT_TRUE(s.rounds(0).failed());
  EXPECT_DOUBLE_EQ(s.rounds(0).ended_unix_s() - s.rounds(0).began_unix_s(), 10);
  // b caused one restart, the most allowed: it is kept out, and a waits alone.
  ASSERT_EQ(s.excluded_size(), 1);
  EXPECT_EQ(s.excluded(0).host(), "b");
  EXPECT_TRUE(s.excluded(0).out_now());
  EXPECT_DOUBLE_EQ(s.excluded(0).cooldown_left_s(), 60);
  for (const v1::NodeStatus& node : s.nodes()) {
    EXPECT_EQ(node.restarts_caused(), node.host() == "b" ? 1 : 0) << node.host();
    EXPECT_EQ(node.state(), node.host() == "b" ? "excluded" : "waiting") << node.host();
  }
  EXPECT_EQ(s.state(), "gathering");
  EXPECT_EQ(s.world_size(), 0);

  const std::string text = FormatRunStatus(s);
  EXPECT_THAT(
      text, HasSubstr("run 'job': gathering, round 0, nodes 1 of 2 joined, restarts 1 of 3 used"));
  EXPECT_THAT(text, HasSubstr("last failure (round 0): rank 3 (local rank 1) on b, SIGSEGV"));
  EXPECT_THAT(text, HasSubstr("  Segmentation fault\n"));
  EXPECT_THAT(text, HasSubstr("kept out:\n  b (1m left): "));
  EXPECT_EQ(s.waiting(), "a round needs 2 nodes (--nnodes=2:2); 1 joined");
  EXPECT_THAT(text, HasSubstr("\nwaiting: a round needs 2 nodes (--nnodes=2:2); 1 joined\n"));
}

TEST_F(RunStatusTest, ANodeBeyondTheMaximumWaitsAndTheStatusSaysWhy) {
  ASSERT_TRUE(rounds_->Join(1, Node("a"), now_).ok());
  EXPECT_EQ(Status().waiting(), "a round needs 2 nodes (--nnodes=2:2); 1 joined");
  ASSERT_TRUE(rounds_->Join(2, Node("b"), now_).ok());
  EXPECT_EQ(Status().waiting(), "");  // both in the round
  ASSERT_TRUE(rounds_->Join(3, Node("c"), now_).ok());
  const v1::RunStatus s = Status();
  EXPECT_EQ(s.nodes(2).state(), "waiting");
  EXPECT_EQ(s.waiting(),
            "the job runs at its --nnodes=2:2 maximum: a node that joins waits "
            "for one to leave");
}

TEST_F(RunStatusTest, AStoppedRunSaysSoAndHowItEnded) {
  ASSERT_TRUE(rounds_->Join(1, Node("a"), now_).ok());
  ASSERT_TRUE(rounds_->Join(2, Node("b"), now_).ok());
  rounds_->Stop("stopped by request from ipv4:127.0.0.1:5: maintenance", now_);
  const std::vector<Outbound> out = rounds_->TakeOutbound();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back().outcome, RunOutcome::kStopped);
  const v1::RunStatus s = Status();
  EXPECT_EQ(s.state(), "ended");
  EXPECT_EQ(s.outcome(), "stopped");
  EXPECT_THAT(s.rounds(0).ended_by(), HasSubstr("maintenance"));
  rounds_->Stop("again", now_);  // nothing once ended
  EXPECT_TRUE(rounds_->TakeOutbound().empty());
  // An agent that comes late is told the same, and exits 0 too.
  ASSERT_TRUE(rounds_->Join(3, Node("c"), now_).ok());
  const std::vector<Outbound> late = rounds_->TakeOutbound();
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].session, 3u);
  EXPECT_EQ(late[0].kind, Outbound::Kind::kEnd);
  EXPECT_EQ(late[0].outcome, RunOutcome::kStopped);
}

TEST_F(RunStatusTest, TheMetricsReadTheSameStatus) {
  ASSERT_TRUE(rounds_->Join(1, Node("a"), now_).ok());
  ASSERT_TRUE(rounds_->Join(2, Node("b"), now_).ok());
  ReportedFailure killed, foreign, odd;
  killed.rank = 2;
  killed.exit_code = -9;
  foreign.rank = 0;  // not b's rank: not counted
  foreign.exit_code = 1;
  odd.rank = 3;
  odd.exit_code = 100000;  // a code no process has: one "other" series, not one per value
  rounds_->ReportFailure(2, 0, {killed, foreign, odd}, now_);
  MasterMetrics metrics;
  metrics.StoreCall(StoreOp::kGet, true, absl::Milliseconds(2));
  v1::StatusReply reply;
  // What a scrape reads: the counts, without a line per node.
  *reply.add_runs() = RunStatusOf("job", *rounds_, {now_, wall_}, /*lists=*/false);
  EXPECT_EQ(reply.runs(0).nodes_size(), 0);
  EXPECT_EQ(reply.runs(0).node_states().at("waiting"), 0);
  // Stopped, not rejoined yet; b caused the failure, the most --max-node-failures allows.
  EXPECT_EQ(reply.runs(0).node_states().at("idle"), 1);
  EXPECT_EQ(reply.runs(0).node_states().at("excluded"), 1);
  EXPECT_EQ(reply.runs(0).last_failure().rank(), 2);
  const std::string text = prometheus::TextSerializer().Serialize(metrics.Collect(reply));
  EXPECT_THAT(text, HasSubstr("ddprun_restarts_total{run_id=\"job\"} 1"));
  EXPECT_THAT(text, HasSubstr("ddprun_runs{state=\"gathering\"} 1"));
  EXPECT_THAT(text, HasSubstr("ddprun_nodes{run_id=\"job\",state=\"idle\"} 1"));
  EXPECT_THAT(text, HasSubstr("ddprun_nodes_excluded{run_id=\"job\"} 1"));
  EXPECT_THAT(text, HasSubstr("ddprun_worker_failures_total{run_id=\"job\",cause=\"signal\","
                              "code=\"SIGKILL\"} 1"));
  EXPECT_THAT(text, HasSubstr("ddprun_worker_failures_total{run_id=\"job\",cause=\"exit_code\","
                              "code=\"other\"} 1"));
  EXPECT_THAT(text, Not(HasSubstr("code=\"1\"")));
  EXPECT_THAT(text, HasSubstr("ddprun_store_operations_total{op=\"get\",result=\"ok\"} 1"));
  metrics.ForgetRun("job");
  EXPECT_THAT(prometheus::TextSerializer().Serialize(metrics.Collect(v1::StatusReply())),
              Not(HasSubstr("run_id=\"job\"")));
}

TEST_F(RunStatusTest, AHangAndAnExpiredFileTimerAreCausesOfTheirOwn) {
  ASSERT_TRUE(rounds_->Join(1, Node("a"), now_).ok());
  ASSERT_TRUE(rounds_->Join(2, Node("b"), now_).ok());
  ReportedFailure timer, silent;
  timer.rank = 0;
  timer.exit_code = -6;
  timer.hung = timer.timer = true;
  timer.time = absl::FromUnixSeconds(1'800'000'001);
  silent.rank = 1;
  silent.exit_code = -6;
  silent.hung = true;
  silent.time = absl::FromUnixSeconds(1'800'000'002);
  rounds_->ReportFailure(1, 0, {timer, silent}, now_);
  const v1::RunStatus s = Status();
  EXPECT_EQ(s.last_failure().exit(), "FileTimer expired");
  EXPECT_TRUE(s.last_failure().timer());
  std::map<std::string, int> causes;
  for (const v1::FailureCount& f : s.worker_failures()) causes[f.cause()] += f.count();
  EXPECT_EQ(causes, (std::map<std::string, int>{{"hang", 1}, {"timer", 1}}));
}

TEST(AgentMetricsTest, WorkersByStateAndExitsByCause) {
  AgentMetricsSnapshot agent;
  agent.run_id = "job";
  agent.workers = {{"running", 3}, {"failed", 1}};
  agent.worker_exits[{"signal", "SIGSEGV"}] = 2;
  const std::string text = prometheus::TextSerializer().Serialize(AgentMetricFamilies(agent));
  EXPECT_THAT(text, HasSubstr("ddprun_agent_workers{run_id=\"job\",state=\"running\"} 3"));
  EXPECT_THAT(text, HasSubstr("ddprun_agent_worker_exits_total{run_id=\"job\",cause=\"signal\","
                              "code=\"SIGSEGV\"} 2"));
}

// Each node says where the restart into round 1 went on it; the round table keeps, for each
// part, the longest any node said (the job waited for the slowest), and `ddprun status`
// shows the total and its longest part.
TEST_F(RunStatusTest, TheRoundTableKeepsTheLongestOfEachPartOfARestart) {
  settings_.node_health.max_node_failures = 0;  // b stays in after its failure
  rounds_ = std::make_unique<RoundStateMachine>(settings_, now_);
  ASSERT_TRUE(rounds_->Join(1, Node("a"), now_).ok());
  ASSERT_TRUE(rounds_->Join(2, Node("b"), now_).ok());
  ReportedFailure f;
  f.rank = 3;
  f.exit_code = 1;
  rounds_->ReportFailure(2, 0, {f}, now_);
  ASSERT_TRUE(rounds_->Join(1, Node("a"), now_).ok());
  ASSERT_TRUE(rounds_->Join(2, Node("b"), now_).ok());
  ASSERT_EQ(rounds_->round(), 1);
  RestartSplit a;  // served the store
  a.round = 1;
  a.stop = absl::Milliseconds(20);
  a.spawn = absl::Milliseconds(15);
  a.connected = absl::Milliseconds(1307);
  a.total = absl::Milliseconds(1342);
  RestartSplit b;  // its worker failed
  b.round = 1;
  b.detection = absl::Milliseconds(4);
  b.stop = absl::Milliseconds(32);
  b.spawn = absl::Milliseconds(4);
  b.total = absl::Milliseconds(40);
  rounds_->RestartExplained(1, a);
  rounds_->RestartExplained(2, b);
  RestartSplit stray = b;
  stray.round = 7;  // no such round: nothing
  rounds_->RestartExplained(2, stray);
  rounds_->RestartExplained(9, b);  // no such session: nothing
  const v1::RunStatus s = Status();
  ASSERT_EQ(s.rounds_size(), 2);
  EXPECT_TRUE(s.rounds(0).restart_ms().empty()) << "the first round is no restart";
  const auto& ms = s.rounds(1).restart_ms();
  EXPECT_EQ(ms.size(), 5u);
  EXPECT_DOUBLE_EQ(ms.at("detection"), 4);
  EXPECT_DOUBLE_EQ(ms.at("stop"), 32);
  EXPECT_DOUBLE_EQ(ms.at("spawn"), 15);
  EXPECT_DOUBLE_EQ(ms.at("connected"), 1307);
  EXPECT_DOUBLE_EQ(ms.at("total"), 1342);
  const std::string text = FormatRunStatus(s);
  EXPECT_THAT(text, HasSubstr("RESTARTED IN"));
  EXPECT_THAT(text, HasSubstr("1.342s (connected 1.307s)"));
}

// A restarted master takes round 4 up from its nodes, which were without a master for a
// while; the round table says so, with the longest outage any member said.
TEST_F(RunStatusTest, ARoundTakenUpByARestartedMasterShowsTheOutage) {
  testing::RoundOf of;
  of.round = 4;
  of.restart_count = 1;
  of.world_size = 4;
  NodeInfo a = Node("a");
  NodeInfo b = Node("b");
  of.incarnations = {a.incarnation, b.incarnation};
  const std::vector<Assignment> round = testing::ProvedRound(of);
  a.resume = round[0];
  b.resume = round[1];
  ASSERT_TRUE(rounds_->Join(11, a, now_).ok());
  ASSERT_TRUE(rounds_->Join(12, b, now_).ok());
  now_ += rounds_->ReconnectGrace();  // the restarted master listens for resumes that long
  rounds_->Tick(now_);
  rounds_->OutageExplained(11, 4, absl::Milliseconds(3200));
  rounds_->OutageExplained(12, 4, absl::Milliseconds(2900));
  rounds_->OutageExplained(12, 3, absl::Seconds(60));  // another round: nothing
  rounds_->OutageExplained(99, 4, absl::Seconds(60));  // no such member: nothing
  const v1::RunStatus s = Status();
  ASSERT_EQ(s.rounds_size(), 1);
  EXPECT_EQ(s.rounds(0).round(), 4);
  EXPECT_EQ(s.rounds(0).restart_count(), 1);
  EXPECT_TRUE(s.rounds(0).taken_up());
  EXPECT_DOUBLE_EQ(s.rounds(0).master_outage_ms(), 3200);
  EXPECT_EQ(s.nodes_size(), 2);
  const std::string text = FormatRunStatus(s);
  EXPECT_THAT(text, HasSubstr("MASTER AWAY"));
  EXPECT_THAT(text, HasSubstr("3.2s, taken up"));
  EXPECT_THAT(StatusJson(s, false), HasSubstr("\"master_outage_ms\":3200"));
}

TEST(AgentMetricsTest, EachMasterOutageIsInItsHistogram) {
  AgentMetricsSnapshot agent;
  agent.run_id = "job";
  const std::string none = prometheus::TextSerializer().Serialize(AgentMetricFamilies(agent));
  EXPECT_THAT(none, Not(HasSubstr("ddprun_agent_master_outage_seconds_count")));
  agent.master_outages.Observe(3.2);
  const std::string text = prometheus::TextSerializer().Serialize(AgentMetricFamilies(agent));
  EXPECT_THAT(text, HasSubstr("ddprun_agent_master_outage_seconds_count{run_id=\"job\"} 1"));
  EXPECT_THAT(text,
              HasSubstr("ddprun_agent_master_outage_seconds_bucket{run_id=\"job\",le=\"5\"} 1"));
  EXPECT_THAT(text,
              HasSubstr("ddprun_agent_master_outage_seconds_bucket{run_id=\"job\",le=\"2.5\"} 0"));
}

}  // namespace
}  // namespace ddprun
