// The agent's rules as scenarios that read like the protocol document: each file in
// agent/tests/testdata/ is a script of events, each followed by the actions the rules must
// emit, in order (in the manner of the raft library's testdata/*.txt interaction tests).
//
//   # comment
//   signal SIGTERM            <- an event (see Apply below for every verb)
//   > stop-workers SIGTERM    <- the actions it causes; log lines as "> log warning: text"
//
// The format and the runner: tests/support/scenario_scripts.h.
//
// After `observe`, a script also shows what the agent's observers make of its moments: the
// torchelastic records (--event-log-handler) as "> record STATE SOURCE key=value...", and
// each restart's split as the agent's own line. The harness then plays the shell's part of
// the stream as ElasticAgent does ("> shell moment ..."): workers-started when it runs
// start-workers, attempt-closed before it answers close-attempt, exiting at exit.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <type_traits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "agent/agent_state_machine.h"
#include "agent/elastic_records.h"
#include "agent/moments.h"
#include "agent/restart_timeline.h"
#include "agent/tests/agent_actions.h"
#include "common/process_status.h"
#include "gtest/gtest.h"
#include "tests/support/scenario_scripts.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

namespace fs = std::filesystem;

int SignalNumber(const std::string& name) {
  for (int sig = 1; sig < 32; ++sig) {
    if (SignalName(sig) == name) return sig;
  }
  return 0;
}

// A record as a script line: its state, its source, and the metadata that carry times.
std::string CompactRecord(const std::string& json) {
  static const std::regex kName(R"re("torchelastic\.worker\.status\.(\w+)", "source": "(\w+)")re");
  static const std::regex kTimes(R"re("(\w+_ms)": ([0-9.]+))re");
  std::smatch name;
  if (!std::regex_search(json, name, kName)) return "record ?";
  std::string line = absl::StrCat("record ", name[1].str(), " ", name[2].str());
  for (auto it = std::sregex_iterator(json.begin(), json.end(), kTimes);
       it != std::sregex_iterator(); ++it) {
    absl::StrAppend(&line, " ", (*it)[1].str(), "=", (*it)[2].str());
  }
  return line;
}

// What the agent's observers make of the moments: the records and each restart's line.
class Observed : private MomentObserver {
 public:
  explicit Observed(absl::Time now) : restarts_(&moments_) {
    RecordLogSettings settings;
    settings.kind = RecordLogSettings::Kind::kFile;
    settings.path = dir_ / "records.jsonl";
    absl::StatusOr<RecordLog> log = RecordLog::Open(settings);
    EXPECT_TRUE(log.ok()) << log.status();
    records_.emplace(std::move(*log), RecordSource{"job", "trainer", "node0", "c10d", "train.py"},
                     now);
    moments_.Subscribe(*records_);
    moments_.Subscribe(restarts_);
    moments_.Subscribe(*this);
  }
  void Announce(AgentMoment moment, std::vector<std::string>& out) {
    moments_.Announce(std::move(moment));
    // The records first: the agent's line is its last observer's.
    std::ifstream in(dir_ / "records.jsonl");
    int n = 0;
    for (std::string line; std::getline(in, line); ++n) {
      if (n >= records_seen_) out.push_back(CompactRecord(line));
    }
    records_seen_ = n;
    for (std::string& line : lines_) out.push_back(std::move(line));
    lines_.clear();
  }
  // A moment the shell announces, shown as such.
  void AnnounceForShell(AgentMoment moment, std::vector<std::string>& out) {
    out.push_back(absl::StrCat("shell ", DescribeMoment(moment)));
    Announce(std::move(moment), out);
  }

 private:
  void See(const AgentMoment& moment) override {
    if (moment.kind == AgentMoment::Kind::kRestartExplained) {
      lines_.push_back(absl::StrCat("restart-line: ", FormatRestartSplit(*moment.split)));
    }
  }

  testing::TempDir dir_;
  Moments moments_;
  std::optional<ElasticRecords> records_;
  RestartTimeline restarts_;
  std::vector<std::string> lines_;
  int records_seen_ = 0;
};

// A value of a rules option as a script writes it: a duration as "5s", a flag as true or
// false, else a number.
template <typename Value>
bool ParseOptionValue(const std::string& text, Value& out) {
  if constexpr (std::is_same_v<Value, absl::Duration>) {
    return absl::ParseDuration(text, &out);
  } else if constexpr (std::is_same_v<Value, bool>) {
    return absl::SimpleAtob(text, &out);
  } else {
    return absl::SimpleAtoi(text, &out);
  }
}

class Scenario : public testing::ScenarioMachine {
 public:
  Scenario() { Make(); }

  // A new machine with what the script said of the node so far.
  void Make() {
    AgentSettings s;
    s.health_check = health_check_;
    s.serves_store = serves_store_;
    s.host = "node0";
    s.nproc_per_node = 2;
    s.options = options_;
    s.heartbeat_interval = absl::Seconds(5);
    s.join_deadline = absl::Seconds(605);
    s.join_timeout = absl::Seconds(600);
    s.master_endpoint = "master:29400";
    s.master_outage_timeout = absl::Seconds(300);
    sm_ = std::make_unique<AgentStateMachine>(s, now_);
  }

  // options NAME=VALUE...: the command line's settings for the rules (agent/rule_options.h).
  void SetOptions(const std::map<std::string, std::string>& args) {
    for (const auto& [name, value] : args) {
      bool known = false;
      ForEachRuleOption(options_, [&](const char* field, auto& to) {
        if (name != field) return;
        known = true;
        EXPECT_TRUE(ParseOptionValue(value, to)) << name << "=" << value;
      });
      EXPECT_TRUE(known) << "options: no rule option " << name;
    }
    Make();
  }

  // Runs one event line; returns the actions it caused, described.
  std::vector<std::string> Apply(const std::string& line) override {
    const std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    const std::string& verb = words[0];
    const std::map<std::string, std::string> args = testing::ScenarioArgs(words, 1);
    std::vector<std::string> out;
    if (verb == "observe") {  // from here on: what the observers make of the moments
      observed_ = std::make_unique<Observed>(now_);
    } else if (verb == "health-checked-node") {  // before start: a health check before every join
      health_check_ = true;
      Make();
    } else if (verb == "store-serving-node") {  // before start: its agent serves the store
      serves_store_ = true;
      Make();
    } else if (verb == "options") {  // before start: options NAME=VALUE... (see SetOptions)
      SetOptions(args);
    } else if (verb == "store-may-open") {  // store-may-open round=R: kStoreOpen came
      sm_->StoreMayOpen(testing::ScenarioInt(args, "round", 0));
    } else if (verb == "start") {
      sm_->Start(now_);
    } else if (verb == "assigned") {  // assigned round=R restarts=C [group-rank=G]
      Assignment a;
      a.round = testing::ScenarioInt(args, "round", 0);
      a.restart_count = testing::ScenarioInt(args, "restarts", 0);
      a.group_rank = testing::ScenarioInt(args, "group-rank", 0);
      a.group_world_size = a.group_rank + 1;
      a.master_addr = "node1";
      a.master_port = 29500;
      sm_->Assigned(a, now_);
    } else if (verb == "assigned-nodes") {  // assigned-nodes N round=R: a round of N nodes
      Assignment a;
      a.round = testing::ScenarioInt(args, "round", 0);
      a.group_world_size = std::stoi(words.at(1));
      sm_->Assigned(a, now_);
    } else if (verb == "hang") {  // hang local-rank=L [unhealthy]: HangWatch found one
      FoundHang hang;
      hang.local_rank = testing::ScenarioInt(args, "local-rank", 0);
      hang.pid = 100 + hang.local_rank;
      hang.cause = absl::StrCat("rank ", hang.local_rank,
                                args.count("unhealthy") > 0 ? " has been in uninterruptible sleep"
                                                            : " sent no heartbeat");
      hang.node_unhealthy = args.count("unhealthy") > 0;
      sm_->HangFound(hang, now_);
    } else if (verb == "stacks-taken") {
      sm_->StacksTaken();
    } else if (verb == "hang-report") {  // hang-report round=R: the master's merged report
      sm_->HangReportArrived(testing::ScenarioInt(args, "round", 0));
    } else if (verb == "excluded") {  // excluded for=DURATION|forever
      absl::Duration cooldown = absl::InfiniteDuration();
      if (args.at("for") != "forever") {
        EXPECT_TRUE(absl::ParseDuration(args.at("for"), &cooldown)) << line;
      }
      sm_->Excluded("node0 failed its health check", cooldown, now_);
    } else if (verb == "health") {  // health ok | health failed TEXT...
      const size_t text = line.find(' ', line.find(words.at(1)));
      sm_->HealthChecked(words.at(1) == "ok" ? "" : line.substr(text + 1), now_);
    } else if (verb == "workers") {
      WorkersView view;
      view.any_failed = args.count("failed") > 0;
      // "all-succeeded" reads better in a script; to the rules it is "all exited".
      view.all_exited = args.count("all-exited") > 0 || args.count("all-succeeded") > 0;
      sm_->WorkersChanged(view, now_);
    } else if (verb == "closed") {
      if (observed_) {  // as ElasticAgent::CloseAttempt: the outcomes, then the answer
        AgentMoment closed = AgentMoment::Of(AgentMoment::Kind::kAttemptClosed, now_);
        closed.workers =
            Workers(args.count("succeeded") > 0 ? WorkerState::kSucceeded : WorkerState::kFailed);
        observed_->AnnounceForShell(std::move(closed), out);
      }
      AttemptResult result;
      result.succeeded = args.count("succeeded") > 0;
      if (args.count("root-rank") > 0) {
        result.root_cause =
            AttemptResult::RootCause{testing::ScenarioInt(args, "root-rank", 0),
                                     testing::ScenarioInt(args, "code", 1), args.count("hung") > 0};
      }
      result.awaits_hang_report = args.count("awaits-report") > 0;
      sm_->AttemptClosed(result, now_);
    } else if (verb == "stop") {  // next-round=N: a restart in place, round N sent with it
      std::optional<Assignment> next;
      if (args.count("next-round") > 0) {
        next.emplace();
        next->round = testing::ScenarioInt(args, "next-round", 0);
        next->restart_count = testing::ScenarioInt(args, "restarts", 0);
      }
      sm_->StopOrdered(
          args.count("membership") > 0 ? StopReason::kMembershipChanged : StopReason::kWorkerFailed,
          "the round ended", args.count("stacks") > 0, next, now_);
    } else if (verb == "end") {
      std::vector<ReportedFailure> root;
      if (args.count("root-host") > 0) {
        ReportedFailure f;
        f.host = args.at("root-host");
        f.rank = testing::ScenarioInt(args, "root-rank", 0);
        f.exit_code = testing::ScenarioInt(args, "root-code", 1);
        f.hung = args.count("root-hung") > 0;
        f.message = "boom";
        root.push_back(f);
      }
      const std::string outcome = words.size() > 1 ? words[1] : "";
      const RunOutcome o = outcome == "failed"      ? RunOutcome::kFailed
                           : outcome == "timed-out" ? RunOutcome::kTimedOut
                           : outcome == "released"  ? RunOutcome::kReleased
                                                    : RunOutcome::kSucceeded;
      sm_->RunEnded(RunEnd{o, "the run ended", root, {}}, args.count("stacks") > 0, now_);
    } else if (verb == "lost") {
      sm_->MasterLost("connection reset", now_);
    } else if (verb == "resumed") {  // resumed round=R: the master gave the place back
      sm_->Resumed(testing::ScenarioInt(args, "round", 0), now_);
    } else if (verb == "reach") {  // reach yes|no: whether group rank 0's store answered
      sm_->JobReach(words.at(1) == "yes", "timed out", now_);
    } else if (verb == "refused") {
      sm_->Refused("wrong token", now_);
    } else if (verb == "progress") {  // progress master|unanswered TEXT...
      const size_t text = line.find(' ', line.find(words.at(1)));
      sm_->Progress(line.substr(text + 1), words.at(1) == "master", now_);
    } else if (verb == "signal") {
      sm_->Signal(SignalNumber(words.at(1)), now_);
    } else if (verb == "tick") {
      absl::Duration d;
      EXPECT_TRUE(absl::ParseDuration(words.at(1), &d)) << line;
      now_ += d;
      sm_->Tick(now_);
    } else if (verb == "fatal") {
      sm_->Fatal(std::stoi(words.at(1)));
    } else {
      ADD_FAILURE() << "unknown event: " << line;
    }
    for (const AgentAction& a : sm_->TakeActions()) {
      out.push_back(DescribeAction(a));
      if (observed_) Observe(a, out);
    }
    return out;
  }

 private:
  // The shell's part of the moments, where ElasticAgent announces them.
  void Observe(const AgentAction& a, std::vector<std::string>& out) {
    if (a.kind == AgentAction::Kind::kMoment) {
      observed_->Announce(a.moment, out);
    } else if (a.kind == AgentAction::Kind::kStartWorkers) {
      AgentMoment started = AgentMoment::Of(AgentMoment::Kind::kWorkersStarted, now_);
      started.workers = Workers(WorkerState::kRunning);
      observed_->AnnounceForShell(std::move(started), out);
    } else if (a.kind == AgentAction::Kind::kExit) {
      AgentMoment exiting = AgentMoment::Of(AgentMoment::Kind::kExiting, now_);
      exiting.run_end = sm_->run_end();
      exiting.exit_code = a.exit_code;
      observed_->AnnounceForShell(std::move(exiting), out);
    }
  }
  // The node's two workers (nproc_per_node), ranks 0 and 1, in `state`.
  static std::vector<WorkerOutcome> Workers(WorkerState state) {
    const int wait_status = state == WorkerState::kFailed ? 1 << 8 : 0;  // exit code 1
    return {{0, 0, 100, state, wait_status}, {1, 1, 101, state, wait_status}};
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  bool health_check_ = false;
  bool serves_store_ = false;
  RuleOptions options_;
  std::unique_ptr<AgentStateMachine> sm_;
  std::unique_ptr<Observed> observed_;
};

TEST(AgentScenarios, EveryScriptGivesItsActions) {
  testing::RunScenarioScripts(fs::path(DDPRUN_SOURCE_DIR) / "agent/tests/testdata", 26,
                              [] { return std::make_unique<Scenario>(); });
}

}  // namespace
}  // namespace ddprun
