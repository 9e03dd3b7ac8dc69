// The leader election's rules as scenarios: each file in rendezvous/tests/testdata/election/
// is a script of what the store answered and what the streams saw, each followed by the
// actions the LeaderElection emits, in order.
//
//   read none rev=7                 <- the leader key read: absent, at revision 7
//   > grant-lease                   <- the action it causes
//   > role campaigning              <- a change of role, after the actions
//
// Every event line (see Apply) uses the store's words; times are on a fake clock that only
// `tick` moves. The format and the runner: tests/support/scenario_scripts.h.
#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "rendezvous/leader_election.h"
#include "tests/support/scenario_scripts.h"

namespace ddprun {
namespace {

namespace fs = std::filesystem;
using Kind = ElectionAction::Kind;

ElectionSettings Settings() {
  ElectionSettings s;
  s.run_id = "job";
  s.self = "node0:29400";
  s.store = "kv";
  s.key = "/ddprun/job/leader";
  s.prefix = "/ddprun";
  s.security_doc = "docs/security.md";
  s.lease_ttl = absl::Seconds(5);
  return s;
}

// The text after the first `skip` words of `line`.
std::string Rest(const std::string& line, size_t skip) {
  size_t at = 0;
  for (size_t i = 0; i < skip && at != std::string::npos; ++i) {
    at = line.find(' ', at);
    if (at != std::string::npos) ++at;
  }
  return at == std::string::npos ? "" : line.substr(at);
}

// "error TEXT" (unavailable), "denied TEXT" (a refusal), or OK.
absl::Status StatusOf(const std::vector<std::string>& words, const std::string& line) {
  for (size_t i = 1; i < words.size(); ++i) {
    if (words[i] == "error") return absl::UnavailableError(Rest(line, i + 1));
    if (words[i] == "denied") return absl::PermissionDeniedError(Rest(line, i + 1));
  }
  return absl::OkStatus();
}

class Scenario : public testing::ScenarioMachine {
 public:
  std::vector<std::string> Apply(const std::string& line) override {
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    const std::string& verb = words[0];
    const absl::Status status = StatusOf(words, line);
    // The words before a status's text.
    const auto text = std::find_if(words.begin(), words.end(), [](const std::string& w) {
      return w == "error" || w == "denied";
    });
    const std::map<std::string, std::string> args =
        testing::ScenarioArgs(std::vector<std::string>(words.begin(), text), 1);
    const auto num = [&](const std::string& key) { return testing::ScenarioInt(args, key, 0); };
    const auto key = [&] {
      LeaderKey k;
      k.value = args.count("key") > 0 ? args.at("key") : "";
      k.lease = num("lease");
      k.create_revision = num("created");
      return k;
    };
    if (verb == "start") {
      sm_.Start(now_);
    } else if (verb == "read") {  // read none rev=R | read key=V lease=L created=C rev=R
      LeaderElection::Read read;
      if (args.count("key") > 0) read.key = key();
      read.revision = num("rev");
      sm_.LeaderRead(status.ok() ? absl::StatusOr<LeaderElection::Read>(read) : status, now_);
    } else if (verb == "granted") {  // granted lease=L
      sm_.LeaseGranted(status.ok() ? absl::StatusOr<int64_t>(num("lease")) : status, now_, now_);
    } else if (verb == "campaign") {  // campaign won|lost key=V lease=L created=C rev=R
      LeaderElection::Campaign c;
      c.won = words.at(1) == "won";
      c.holder = key();
      if (c.won) c.holder.value = "node0:29400";
      c.revision = num("rev");
      sm_.Campaigned(status.ok() ? absl::StatusOr<LeaderElection::Campaign>(c) : status, now_);
    } else if (verb == "hosted") {  // hosted [recalled WORDS...] | hosted error TEXT
      sm_.Hosted(status, words.size() > 1 && words[1] == "recalled" ? Rest(line, 2) : "", now_);
    } else if (verb == "revoked") {  // revoked lease=L [error TEXT]
      sm_.Revoked(num("lease"), status, now_);
    } else if (verb == "written") {  // written version=V [refused | error TEXT]
      absl::StatusOr<bool> fenced = args.count("refused") == 0;
      if (!status.ok()) fenced = status;
      sm_.MemoryWritten(num("version"), fenced, now_);
    } else if (verb == "probed") {  // probed ADDRESS listens|refused|unreachable
      const std::string& reach = words.at(2);
      sm_.LeaderProbed(words.at(1),
                       reach == "refused"       ? LeaderElection::Reach::kRefused
                       : reach == "unreachable" ? LeaderElection::Reach::kUnreachable
                                                : LeaderElection::Reach::kListens,
                       "Connection refused", now_);
    } else if (verb == "put") {  // put watch=W key=V lease=L
      LeaderElection::KeyChange change;
      change.key = key();
      sm_.KeyChanged(num("watch"), change, now_);
    } else if (verb == "deleted") {  // deleted watch=W
      LeaderElection::KeyChange change;
      change.deleted = true;
      sm_.KeyChanged(num("watch"), change, now_);
    } else if (verb == "watch-ended") {  // watch-ended watch=W [error TEXT]
      sm_.WatchEnded(num("watch"), status, now_);
    } else if (verb == "renewed") {  // renewed lease=L [expired]
      sm_.LeaseRenewed(num("lease"), now_, args.count("expired") > 0, now_);
    } else if (verb == "memory") {  // memory version=V
      sm_.MemoryChanged(num("version"), now_);
    } else if (verb == "master-lost") {
      sm_.MasterLost(now_);
    } else if (verb == "run-over") {
      sm_.RunOver(now_);
    } else if (verb == "tick") {  // tick DURATION: the clock moves, Tick at every deadline
      absl::Duration d;
      EXPECT_TRUE(absl::ParseDuration(words.at(1), &d)) << line;
      const absl::Time until = now_ + d;
      std::vector<std::string> out;
      while (sm_.NextDeadline() <= until) {
        now_ = std::max(now_, sm_.NextDeadline());
        sm_.Tick(now_);
        for (const std::string& a : Described()) out.push_back(a);
      }
      now_ = until;
      return out;
    } else {
      ADD_FAILURE() << "unknown event: " << line;
    }
    return Described();
  }

 private:
  // The actions, then the role when it changed.
  std::vector<std::string> Described() {
    std::vector<std::string> out;
    for (const ElectionAction& a : sm_.TakeActions()) out.push_back(Describe(a));
    if (sm_.role() != role_) {
      role_ = sm_.role();
      out.push_back(absl::StrCat("role ", ElectionRoleName(role_)));
    }
    return out;
  }

  std::string Describe(const ElectionAction& a) {
    switch (a.kind) {
      case Kind::kRead:
        return "read";
      case Kind::kGrantLease:
        return "grant-lease";
      case Kind::kCampaign:
        return absl::StrCat("campaign lease=", a.lease);
      case Kind::kHost:
        return absl::StrCat("host revision=", a.revision);
      case Kind::kStepDown:
        return "step-down";
      case Kind::kWatch:
        return absl::StrCat("watch ", a.watch, " from=", a.revision);
      case Kind::kSwitchWatch:
        return "switch-watch";
      case Kind::kKeepAlive:
        return absl::StrCat("keep-alive lease=", a.lease);
      case Kind::kSwitchKeepAlive:
        return "switch-keep-alive";
      case Kind::kRevoke:
        return absl::StrCat("revoke lease=", a.lease);
      case Kind::kWriteMemory:
        return absl::StrCat("write-memory version=", a.version, " revision=", a.revision,
                            " within=", absl::FormatDuration(a.deadline - now_));
      case Kind::kProbeLeader:
        return absl::StrCat("probe ", a.address);
      case Kind::kFollow:
        return absl::StrCat("follow ", a.address.empty() ? "none" : a.address);
      case Kind::kRefused:
        return absl::StrCat("refused: ", a.text);
      case Kind::kLog:
        return absl::StrCat("log ",
                            a.level == LogLevel::kInfo      ? "info"
                            : a.level == LogLevel::kWarning ? "warning"
                                                            : "error",
                            ": ", a.text);
    }
    return "?";
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  LeaderElection sm_{Settings()};
  ElectionRole role_ = ElectionRole::kReading;
};

TEST(ElectionScenarios, EveryScriptGivesItsActions) {
  testing::RunScenarioScripts(fs::path(DDPRUN_SOURCE_DIR) / "rendezvous/tests/testdata/election", 6,
                              [] { return std::make_unique<Scenario>(); });
}

TEST(CheckLeaderAddress, TakesHostPortAndRefusesTheRest) {
  EXPECT_TRUE(CheckLeaderAddress("node1:29400").ok());
  EXPECT_TRUE(CheckLeaderAddress("[fd00::1]:29400").ok());
  EXPECT_FALSE(CheckLeaderAddress("node1").ok());
  EXPECT_FALSE(CheckLeaderAddress("node1:0").ok());
  EXPECT_FALSE(CheckLeaderAddress("[fd00::1:29400").ok());
  EXPECT_FALSE(CheckLeaderAddress("no de:1").ok());
  EXPECT_FALSE(CheckLeaderAddress(std::string(300, 'a') + ":1").ok());
}

}  // namespace
}  // namespace ddprun
