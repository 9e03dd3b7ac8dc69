// The master's rules as scenarios: each file in rendezvous/tests/testdata/ is a script of
// events from agents' sessions, each followed by the messages the RoundStateMachine sends,
// in order (the agent's side: agent/tests/testdata/).
//
//   settings min=2 max=2 restarts=1   <- first line: the run's settings (defaults below)
//   join 1 node1                      <- session 1 joins as host node1 (see Apply)
//   > 1 assign round=0 rank=0/2 base=0 world=4 restarts=0 master=node1.addr:29001
//
// DDPRUN_REWRITE_SCENARIOS=1 writes the transcript into the file (review it before committing).
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "rendezvous/round_state_machine.h"

namespace ddprun {
namespace {

namespace fs = std::filesystem;

const char* StopName(StopReason r) {
  switch (r) {
    case StopReason::kWorkerFailed:
      return "worker-failed";
    case StopReason::kMembershipChanged:
      return "membership-changed";
    case StopReason::kRunEnded:
      return "run-ended";
  }
  return "?";
}

const char* OutcomeName(RunOutcome o) {
  switch (o) {
    case RunOutcome::kSucceeded:
      return "succeeded";
    case RunOutcome::kFailed:
      return "failed";
    case RunOutcome::kTimedOut:
      return "timed-out";
    case RunOutcome::kReleased:
      return "released";
  }
  return "?";
}

std::string Describe(const Outbound& o) {
  const std::string who = absl::StrCat(o.session, " ");
  switch (o.kind) {
    case Outbound::Kind::kAssign: {
      const Assignment& a = o.assignment;
      return absl::StrCat(who, "assign round=", a.round, " rank=", a.group_rank, "/",
                          a.group_world_size, " base=", a.base_rank, " world=", a.world_size,
                          " restarts=", a.restart_count, " master=", a.master_addr, ":",
                          a.master_port);
    }
    case Outbound::Kind::kStop:
      return absl::StrCat(who, "stop ", StopName(o.stop_reason), ": ", o.detail);
    case Outbound::Kind::kEnd:
      return absl::StrCat(who, "end ", OutcomeName(o.outcome), ": ", o.detail,
                          o.root_cause.empty()
                              ? ""
                              : absl::StrCat(" [root: rank ", o.root_cause.front().rank, " on ",
                                             o.root_cause.front().host, "]"));
    case Outbound::Kind::kEvict:
      return absl::StrCat(who, "evict: ", o.detail);
  }
  return "?";
}

std::map<std::string, std::string> Args(const std::vector<std::string>& words, size_t from) {
  std::map<std::string, std::string> args;
  for (size_t i = from; i < words.size(); ++i) {
    std::vector<std::string> kv = absl::StrSplit(words[i], absl::MaxSplits('=', 1));
    args[kv[0]] = kv.size() > 1 ? kv[1] : "";
  }
  return args;
}

int Int(const std::map<std::string, std::string>& args, const std::string& key, int dflt) {
  int n = dflt;
  if (auto it = args.find(key); it != args.end()) EXPECT_TRUE(absl::SimpleAtoi(it->second, &n));
  return n;
}

class Scenario {
 public:
  // "settings min=2 max=2 restarts=1": 600 s join, 30 s last call, 5 s x 3 keep-alive, 300 s
  // exit barrier unless given (join=, last-call=, keep-alive=, barrier= in seconds).
  explicit Scenario(const std::string& settings_line) {
    const std::map<std::string, std::string> args =
        Args(absl::StrSplit(settings_line, ' ', absl::SkipEmpty()), 1);
    RendezvousSettings s;
    s.min_nodes = Int(args, "min", 1);
    s.max_nodes = Int(args, "max", 1);
    s.max_restarts = Int(args, "restarts", 0);
    s.join_timeout = absl::Seconds(Int(args, "join", 600));
    s.last_call_timeout = absl::Seconds(Int(args, "last-call", 30));
    s.keep_alive_interval = absl::Seconds(Int(args, "keep-alive", 5));
    s.keep_alive_max_attempt = 3;
    s.exit_barrier_timeout = absl::Seconds(Int(args, "barrier", 300));
    sm_ = std::make_unique<RoundStateMachine>(s, now_);
  }

  // join S HOST [rank=HINT] [nproc=N] | heartbeat S | disconnect S | fail S round=R rank=K
  // | succeed S round=R | tick DURATION (time passes, nobody beats) | pass DURATION (time
  // passes second by second, every session that joined beating)
  std::vector<std::string> Apply(const std::string& line) {
    const std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    const std::string& verb = words[0];
    SessionId session = 0;
    if (words.size() > 1) (void)absl::SimpleAtoi(words[1], &session);
    const std::map<std::string, std::string> args = Args(words, 2);
    std::vector<std::string> out;
    if (verb == "join") {
      NodeInfo n;
      n.host = words.at(2);
      n.addr = n.host + ".addr";
      n.incarnation = "inc-" + n.host;
      n.local_world_size = Int(args, "nproc", 2);
      n.node_rank_hint = Int(args, "rank", -1);
      n.master_port = 29000 + static_cast<int>(session);
      if (absl::Status s = sm_->Join(session, n, now_); !s.ok()) {
        out.push_back(absl::StrCat("refused: ", s.message()));
      }
      joined_.insert(session);
    } else if (verb == "heartbeat") {
      sm_->Heartbeat(session, now_);
    } else if (verb == "disconnect") {
      sm_->Disconnect(session, now_);
      joined_.erase(session);
    } else if (verb == "fail") {
      ReportedFailure f;
      f.host = absl::StrCat("host-of-", session);
      f.rank = Int(args, "rank", 0);
      f.exit_code = 1;
      f.time = now_;
      sm_->ReportFailure(session, Int(args, "round", 0), {f}, now_);
    } else if (verb == "succeed") {
      sm_->ReportSuccess(session, Int(args, "round", 0), now_);
    } else if (verb == "tick") {
      absl::Duration d;
      EXPECT_TRUE(absl::ParseDuration(words.at(1), &d)) << line;
      now_ += d;
      sm_->Tick(now_);
    } else if (verb == "pass") {
      absl::Duration d;
      EXPECT_TRUE(absl::ParseDuration(words.at(1), &d)) << line;
      for (const absl::Time end = now_ + d; now_ < end;) {
        now_ = std::min(end, now_ + absl::Seconds(1));
        for (SessionId alive : joined_) sm_->Heartbeat(alive, now_);
        sm_->Tick(now_);
      }
    } else {
      ADD_FAILURE() << "unknown event: " << line;
    }
    for (const Outbound& o : sm_->TakeOutbound()) out.push_back(Describe(o));
    return out;
  }

 private:
  absl::Time now_ = absl::FromUnixSeconds(1000000);
  std::unique_ptr<RoundStateMachine> sm_;
  std::set<SessionId> joined_;  // beat during `pass`
};

TEST(RoundScenarios, EveryScriptGivesItsMessages) {
  std::vector<fs::path> files;
  for (const auto& entry :
       fs::directory_iterator(fs::path(DDPRUN_SOURCE_DIR) / "rendezvous/tests/testdata")) {
    if (entry.path().extension() == ".txt") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 4u) << "the scenarios are missing";
  for (const fs::path& file : files) {
    std::ifstream in(file);
    std::unique_ptr<Scenario> scenario;
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
      event.clear();
      transcript.push_back(line);
      if (line.empty() || absl::StartsWith(line, "#")) continue;
      if (absl::StartsWith(line, "settings")) {
        scenario = std::make_unique<Scenario>(line);
        continue;
      }
      ASSERT_NE(scenario, nullptr) << file.filename().string() << ": no settings line first";
      event = line;
      actual = scenario->Apply(line);
      for (const std::string& a : actual) transcript.push_back("> " + a);
    }
    check();
    if (::getenv("DDPRUN_REWRITE_SCENARIOS") != nullptr) {
      std::ofstream(file) << absl::StrJoin(transcript, "\n") << "\n";
    }
  }
}

}  // namespace
}  // namespace ddprun
