// The agent's rules as scenarios that read like the protocol document: each file in
// agent/tests/testdata/ is a script of events, each followed by the actions the rules must
// emit, in order (in the manner of etcd raft's testdata/*.txt interaction tests).
//
//   # comment
//   signal SIGTERM            <- an event (see Apply below for every verb)
//   > stop-workers SIGTERM    <- the actions it causes; log lines as "> log warning: text"
//
// A mismatch prints the whole transcript as the rules produced it; DDPRUN_REWRITE_SCENARIOS=1
// writes it into the file instead (for a new scenario: review every line before committing).
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <stdlib.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/agent_state_machine.h"
#include "agent/tests/agent_actions.h"
#include "common/process_status.h"
#include "gtest/gtest.h"

namespace ddprun {
namespace {

namespace fs = std::filesystem;

int SignalNumber(const std::string& name) {
  for (int sig = 1; sig < 32; ++sig) {
    if (SignalName(sig) == name) return sig;
  }
  return 0;
}

// "key=value" words after the verb.
std::map<std::string, std::string> Args(const std::vector<std::string>& words) {
  std::map<std::string, std::string> args;
  for (size_t i = 1; i < words.size(); ++i) {
    std::vector<std::string> kv = absl::StrSplit(words[i], absl::MaxSplits('=', 1));
    args[kv[0]] = kv.size() > 1 ? kv[1] : "";
  }
  return args;
}

int IntArg(const std::map<std::string, std::string>& args, const std::string& key, int dflt) {
  int n = dflt;
  auto it = args.find(key);
  if (it != args.end()) EXPECT_TRUE(absl::SimpleAtoi(it->second, &n)) << key << "=" << it->second;
  return n;
}

class Scenario {
 public:
  Scenario() {
    AgentSettings s;
    s.host = "node0";
    s.nproc_per_node = 2;
    s.shutdown_timeout = absl::Seconds(30);
    s.heartbeat_interval = absl::Seconds(5);
    s.join_deadline = absl::Seconds(605);
    s.join_timeout = absl::Seconds(600);
    s.master_endpoint = "master:29400";
    sm_ = std::make_unique<AgentStateMachine>(s, now_);
  }

  // Runs one event line; returns the actions it caused, described.
  std::vector<std::string> Apply(const std::string& line) {
    const std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    const std::string& verb = words[0];
    const std::map<std::string, std::string> args = Args(words);
    if (verb == "start") {
      sm_->Start(now_);
    } else if (verb == "assigned") {
      Assignment a;
      a.round = IntArg(args, "round", 0);
      a.restart_count = IntArg(args, "restarts", 0);
      sm_->Assigned(a);
    } else if (verb == "workers") {
      WorkersView view;
      view.any_failed = args.count("failed") > 0;
      view.all_exited = args.count("all-exited") > 0 || args.count("all-succeeded") > 0;
      view.all_succeeded = args.count("all-succeeded") > 0;
      sm_->WorkersChanged(view, now_);
    } else if (verb == "closed") {
      AttemptResult result;
      result.succeeded = args.count("succeeded") > 0;
      if (args.count("root-rank") > 0) {
        result.root_cause =
            AttemptResult::RootCause{IntArg(args, "root-rank", 0), IntArg(args, "code", 1)};
      }
      sm_->AttemptClosed(result, now_);
    } else if (verb == "stop") {
      sm_->StopOrdered(
          args.count("membership") > 0 ? StopReason::kMembershipChanged : StopReason::kWorkerFailed,
          "the round ended", now_);
    } else if (verb == "end") {
      std::vector<ReportedFailure> root;
      if (args.count("root-host") > 0) {
        ReportedFailure f;
        f.host = args.at("root-host");
        f.rank = IntArg(args, "root-rank", 0);
        f.exit_code = IntArg(args, "root-code", 1);
        f.message = "boom";
        root.push_back(f);
      }
      const std::string outcome = words.size() > 1 ? words[1] : "";
      const RunOutcome o = outcome == "failed"      ? RunOutcome::kFailed
                           : outcome == "timed-out" ? RunOutcome::kTimedOut
                           : outcome == "released"  ? RunOutcome::kReleased
                                                    : RunOutcome::kSucceeded;
      sm_->RunEnded(o, "the run ended", root, now_);
    } else if (verb == "lost") {
      sm_->MasterLost("connection reset", now_);
    } else if (verb == "refused") {
      sm_->Refused("wrong token", now_);
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
    std::vector<std::string> out;
    for (const AgentAction& a : sm_->TakeActions()) out.push_back(DescribeAction(a));
    return out;
  }

 private:
  absl::Time now_ = absl::FromUnixSeconds(1000);
  std::unique_ptr<AgentStateMachine> sm_;
};

std::vector<fs::path> ScenarioFiles() {
  std::vector<fs::path> files;
  for (const auto& entry :
       fs::directory_iterator(fs::path(DDPRUN_SOURCE_DIR) / "agent/tests/testdata")) {
    if (entry.path().extension() == ".txt") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(AgentScenarios, EveryScriptGivesItsActions) {
  const std::vector<fs::path> files = ScenarioFiles();
  ASSERT_GE(files.size(), 4u) << "the scenarios are missing";
  for (const fs::path& file : files) {
    std::ifstream in(file);
    Scenario scenario;
    std::vector<std::string> expected, actual, transcript;
    std::string line, event;
    auto check = [&] {
      if (!event.empty()) {
        EXPECT_EQ(absl::StrJoin(actual, "\n"), absl::StrJoin(expected, "\n"))
            << file.filename().string() << ": after '" << event << "'";
      }
      expected.clear();
    };
    while (std::getline(in, line)) {
      if (absl::StartsWith(line, "> ")) {
        expected.push_back(line.substr(2));
        continue;
      }
      check();
      if (line.empty() || absl::StartsWith(line, "#")) {
        transcript.push_back(line);
        event.clear();
        continue;
      }
      event = line;
      actual = scenario.Apply(line);
      transcript.push_back(line);
      for (const std::string& a : actual) transcript.push_back("> " + a);
    }
    check();
    if (::getenv("DDPRUN_REWRITE_SCENARIOS") != nullptr) {  // to write a new scenario's answers
      std::ofstream(file) << absl::StrJoin(transcript, "\n") << "\n";
      continue;
    }
    if (::testing::Test::HasFailure()) {
      std::cerr << "--- " << file.filename().string() << " as the rules run it:\n"
                << absl::StrJoin(transcript, "\n") << "\n";
      return;
    }
  }
}

}  // namespace
}  // namespace ddprun
