// The master's rules as scenarios: each file in rendezvous/tests/testdata/ is a script of
// events from agents' sessions, each followed by the messages the RoundStateMachine sends,
// in order (the agent's side: agent/tests/testdata/).
//
//   settings min=2 max=2 restarts=1   <- first line: the run's settings (see Configure)
//   join 1 node1                      <- session 1 joins as host node1 (see Apply)
//   > 1 assign round=0 rank=0/2 base=0 world=4 restarts=0 master=node1.addr:29001
//
// The format and the runner: tests/support/scenario_scripts.h.
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "rendezvous/round_state_machine.h"
#include "tests/support/proved_round.h"
#include "tests/support/scenario_scripts.h"

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
    case RunOutcome::kStopped:
      return "stopped";
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
    case Outbound::Kind::kStop: {
      std::string next;
      if (o.next) {
        const Assignment& a = *o.next;
        next = absl::StrCat(" -> next round=", a.round, " rank=", a.group_rank, "/",
                            a.group_world_size, " base=", a.base_rank, " world=", a.world_size,
                            " restarts=", a.restart_count, " master=", a.master_addr, ":",
                            a.master_port);
      }
      return absl::StrCat(who, "stop ", StopName(o.stop_reason), ": ", o.detail, next);
    }
    case Outbound::Kind::kEnd:
      return absl::StrCat(who, "end ", OutcomeName(o.outcome), ": ", o.detail,
                          o.root_cause.empty()
                              ? ""
                              : absl::StrCat(" [root: rank ", o.root_cause.front().rank, " on ",
                                             o.root_cause.front().host, "]"));
    case Outbound::Kind::kEvict:
      return absl::StrCat(who, "evict: ", o.detail);
    case Outbound::Kind::kExclude:
      return absl::StrCat(who, "exclude for ", absl::FormatDuration(o.cooldown), ": ", o.detail);
    case Outbound::Kind::kOpenStore:
      return absl::StrCat(who, "open-store round=", o.store_round);
    case Outbound::Kind::kResumed:
      return absl::StrCat(who, "resumed round=", o.store_round);
  }
  return "?";
}

class Scenario : public testing::ScenarioMachine {
 public:
  // settings min=N max=N restarts=N [join=S last-call=S keep-alive=S barrier=S] (seconds;
  // 600, 30, 5 (x 3 attempts), 300 unless given): the first line of every script.
  void Configure(const std::map<std::string, std::string>& args) {
    RendezvousSettings s;
    s.min_nodes = testing::ScenarioInt(args, "min", 1);
    s.max_nodes = testing::ScenarioInt(args, "max", 1);
    s.max_restarts = testing::ScenarioInt(args, "restarts", 0);
    s.join_timeout = absl::Seconds(testing::ScenarioInt(args, "join", 600));
    s.last_call_timeout = absl::Seconds(testing::ScenarioInt(args, "last-call", 30));
    s.keep_alive_interval = absl::Seconds(testing::ScenarioInt(args, "keep-alive", 5));
    s.keep_alive_max_attempt = 3;
    s.exit_barrier_timeout = absl::Seconds(testing::ScenarioInt(args, "barrier", 300));
    sm_ = std::make_unique<RoundStateMachine>(s, now_);
  }

  // join S HOST [rank=HINT] [nproc=N] [in-place] (it can be restarted in place) | resume S
  // HOST round=R place=G/N of=HOST,... world=W restarts=C [in-place] (a join asking for its
  // place back in the round its workers run, `of` its members' hosts in group-rank order,
  // each with W/N workers: its proof is the one their master gave it) | heartbeat S | disconnect S
  // (its stream broke) | bye S (its agent exits) | fail S round=R rank=K [peer-lost] | succeed S
  // round=R | stopped S round=R (after a restart in place, its workers of R exited) | stop
  // REASON... (`ddprun stop`) | tick DURATION (time passes, nobody beats) | pass DURATION (time
  // passes second by second, every session that joined beating)
  std::vector<std::string> Apply(const std::string& line) override {
    const std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    const std::string& verb = words[0];
    if (verb == "settings") {
      Configure(testing::ScenarioArgs(words, 1));
      return {};
    }
    if (sm_ == nullptr) {
      ADD_FAILURE() << "a script starts with its settings line, not '" << line << "'";
      return {};
    }
    SessionId session = 0;
    if (words.size() > 1) (void)absl::SimpleAtoi(words[1], &session);
    const std::map<std::string, std::string> args = testing::ScenarioArgs(words, 2);
    std::vector<std::string> out;
    if (verb == "join" || verb == "resume") {
      NodeInfo n;
      n.host = words.at(2);
      n.addr = n.host + ".addr";
      n.incarnation = "inc-" + n.host;
      n.local_world_size = testing::ScenarioInt(args, "nproc", 2);
      n.node_rank_hint = testing::ScenarioInt(args, "rank", -1);
      n.master_port = 29000 + static_cast<int>(session);
      n.restarts_in_place = args.count("in-place") > 0;
      if (verb == "resume") {
        const std::vector<std::string> members = absl::StrSplit(args.at("of"), ',');
        const std::vector<std::string> place = absl::StrSplit(args.at("place"), '/');
        int group_rank = 0;
        EXPECT_TRUE(absl::SimpleAtoi(place.at(0), &group_rank)) << line;
        EXPECT_EQ(place.at(1), std::to_string(members.size())) << line;
        testing::RoundOf of;
        of.round = testing::ScenarioInt(args, "round", 0);
        of.restart_count = testing::ScenarioInt(args, "restarts", 0);
        of.world_size = testing::ScenarioInt(args, "world", 1);
        for (const std::string& host : members) of.incarnations.push_back("inc-" + host);
        of.master_addr = members[0] + ".addr";
        of.master_port = 29011;
        const std::vector<Assignment> round = testing::ProvedRound(of);
        n.resume = round.at(group_rank);
      }
      if (absl::Status s = sm_->Join(session, n, now_); !s.ok()) {
        out.push_back(absl::StrCat("refused: ", s.message()));
      }
      joined_.insert(session);
    } else if (verb == "heartbeat") {
      sm_->Heartbeat(session, now_);
    } else if (verb == "disconnect") {
      sm_->Disconnect(session, now_);
      joined_.erase(session);
    } else if (verb == "bye") {
      sm_->Bye(session, now_);
      joined_.erase(session);
    } else if (verb == "fail") {
      ReportedFailure f;
      f.host = absl::StrCat("host-of-", session);
      f.rank = testing::ScenarioInt(args, "rank", 0);
      f.exit_code = 1;
      f.time = now_;
      f.peer_lost = args.count("peer-lost") > 0;
      sm_->ReportFailure(session, testing::ScenarioInt(args, "round", 0), {f}, now_);
    } else if (verb == "stop") {
      sm_->Stop(absl::StrJoin(words.begin() + 1, words.end(), " "), now_);
    } else if (verb == "stopped") {
      sm_->ReportStopped(session, testing::ScenarioInt(args, "round", 0));
    } else if (verb == "succeed") {
      sm_->ReportSuccess(session, testing::ScenarioInt(args, "round", 0), now_);
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
  testing::RunScenarioScripts(fs::path(DDPRUN_SOURCE_DIR) / "rendezvous/tests/testdata", 7,
                              [] { return std::make_unique<Scenario>(); });
}

}  // namespace
}  // namespace ddprun
