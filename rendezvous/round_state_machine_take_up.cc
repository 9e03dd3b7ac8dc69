// How RoundStateMachine takes up a round it did not begin (docs/protocol.md, "Losing the
// master"): a restarted master, or one that lost every member, holds the resumes it hears by
// the round digest they prove (round_proof.h) for ReconnectGrace() after the first, then
// takes up the round the most of them prove, with that round's numbers. No resume decides
// alone: the first one heard may be a token holder's round of its own making.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rendezvous/round_state_machine.h"

namespace ddprun {

int RoundStateMachine::placeholders() const {
  int most = 0;
  if (take_up_) {
    for (const auto& [digest, held] : take_up_->rounds) {
      most = std::max(most, held.numbers.group_world_size);
    }
  }
  return nodes_.placeholders() + most;
}

absl::Status RoundStateMachine::HoldForTakeUp(SessionId session, const NodeInfo& node,
                                              absl::Time now) {
  DropOldSession(session, node, now);  // this agent's earlier resume, if any
  if (phase_ == Phase::kEnded) return JoinEndedRun(session);
  ForgetHeldResume(session);
  nodes_.SetJoined(nodes_.Admit(session, node, now), false);
  if (!take_up_) {
    take_up_.emplace();  // value-initialized: nothing heard yet
    take_up_->decide_at = now + ReconnectGrace();
  }
  const Assignment& resumed = *node.resume;
  auto [it, first] = take_up_->rounds.try_emplace(resumed.round_digest);
  HeldRound& held = it->second;
  if (first) {
    held.numbers = resumed;
    held.heard = take_up_->heard++;
  }
  // Two resumes prove one place only with one incarnation: the same agent, whose earlier
  // session DropOldSession ended. Another session still there gives its place up.
  SessionId& place = held.places[resumed.group_rank];
  if (place != 0 && place != session && held_resumes_.erase(place) > 0) {
    Outbound out;
    out.session = place;
    out.kind = Outbound::Kind::kStop;
    out.stop_reason = StopReason::kMembershipChanged;
    out.detail = "another session of this node's agent resumed its place";
    outbound_.push_back(std::move(out));
  }
  place = session;
  HeldResume& mine = held_resumes_[session];
  mine.digest = resumed.round_digest;
  mine.group_rank = resumed.group_rank;
  mine.round = resumed.round;
  return absl::OkStatus();
}

bool RoundStateMachine::HoldReport(SessionId session, int64_t round,
                                   const std::vector<ReportedFailure>& failures) {
  auto it = held_resumes_.find(session);
  if (it == held_resumes_.end()) return false;
  if (round == it->second.round) it->second.report = failures;
  return true;
}

void RoundStateMachine::ForgetHeldResume(SessionId session) {
  auto it = held_resumes_.find(session);
  if (it == held_resumes_.end()) return;
  const std::string digest = it->second.digest;
  const int group_rank = it->second.group_rank;
  held_resumes_.erase(it);
  if (!take_up_) return;
  auto round = take_up_->rounds.find(digest);
  if (round == take_up_->rounds.end()) return;
  if (auto place = round->second.places.find(group_rank);
      place != round->second.places.end() && place->second == session) {
    round->second.places.erase(place);
  }
  if (round->second.places.empty()) take_up_->rounds.erase(round);
  if (take_up_->rounds.empty()) take_up_.reset();  // nobody left to take a round up for
}

void RoundStateMachine::AdoptJoinClaims() {
  // What most of the round's members say (a tie: the lower claim), not the highest claim,
  // which one token holder's join would set. Never more than the budget.
  std::map<std::pair<int64_t, int>, int> said;
  for (SessionId s : members_) {
    const NodeInfo& info = nodes_.at(s).info;
    ++said[{info.last_round, std::min(info.restarts_seen, settings_.max_restarts)}];
  }
  const auto most = std::max_element(said.begin(), said.end(), [](const auto& a, const auto& b) {
    return a.second < b.second;  // the first of equals: the lower claim
  });
  if (most == said.end()) return;
  round_ = std::max(round_, most->first.first);
  restarts_spent_ = std::max(restarts_spent_, most->first.second);
}

void RoundStateMachine::DecideTakeUp(absl::Time now) {
  TakeUp take_up = std::move(*take_up_);
  take_up_.reset();
  std::map<SessionId, HeldResume> held_resumes;
  held_resumes.swap(held_resumes_);
  KeepOutHeldHosts(take_up, now);
  if (const HeldRound* chosen = MostProved(take_up)) {
    StopOtherRounds(take_up, *chosen, now);
    const bool whole =
        static_cast<int>(chosen->places.size()) == chosen->numbers.group_world_size &&
        std::all_of(chosen->places.begin(), chosen->places.end(),
                    [this](const auto& place) { return nodes_.count(place.second) > 0; });
    if (whole) {
      TakeUpWhole(*chosen, held_resumes, now);
    } else {
      LoseTakenUpRound(*chosen, now);
    }
  } else {
    gathering_since_ = now;  // every node that resumed is kept out: the gathering begins now
  }
  if (phase_ == Phase::kGathering) MaybeCloseRound(now);  // joins that waited for the take-up
}

void RoundStateMachine::KeepOutHeldHosts(TakeUp& take_up, absl::Time now) {
  // A host kept out since its resume came (its other agent's health check failed, say) has
  // no place to take back: it is told so, as a join would be.
  for (auto& [digest, held] : take_up.rounds) {
    for (auto place = held.places.begin(); place != held.places.end();) {
      const std::string& host = nodes_.at(place->second).info.host;
      if (std::optional<NodeExclusion> excluded = health_.KeepOut(host, now)) {
        SendExclusion(place->second, *excluded, now);
        place = held.places.erase(place);
      } else {
        ++place;
      }
    }
  }
}

const RoundStateMachine::HeldRound* RoundStateMachine::MostProved(const TakeUp& take_up) {
  const HeldRound* chosen = nullptr;
  for (const auto& [digest, held] : take_up.rounds) {
    if (held.places.empty()) continue;
    // The most places, then a round every place of which came back, then the first heard:
    // a round of one resume, whole, does not outweigh two members of a round one short.
    const auto rank = [](const HeldRound& r) {
      return std::make_tuple(r.places.size(),
                             static_cast<int>(r.places.size()) == r.numbers.group_world_size,
                             -r.heard);
    };
    if (!chosen || rank(held) > rank(*chosen)) chosen = &held;
  }
  return chosen;
}

void RoundStateMachine::StopOtherRounds(const TakeUp& take_up, const HeldRound& chosen,
                                        absl::Time now) {
  for (const auto& [digest, held] : take_up.rounds) {
    if (&held == &chosen) continue;
    for (const auto& [group_rank, session] : held.places) {
      if (nodes_.count(session) == 0) continue;  // dropped while the others were stopped
      const NodeInfo node = nodes_.at(session).info;
      (void)StopStale(
          session, node, now,
          absl::StrCat("the restarted master took up round ", chosen.numbers.round,
                       ", which the resumes of ", chosen.places.size(),
                       " node(s) prove; this node's resume proves another round (round ",
                       held.numbers.round, ", ", held.places.size(), " node(s))"));
    }
  }
}

void RoundStateMachine::TakeUpWhole(const HeldRound& chosen,
                                    std::map<SessionId, HeldResume>& held_resumes, absl::Time now) {
  const Assignment& numbers = chosen.numbers;
  Rebuild(numbers, now);
  for (const auto& [group_rank, session] : chosen.places) {
    const NodeInfo node = nodes_.at(session).info;
    TakeOver(members_[group_rank], session, node, now);
  }
  // What the members reported while they waited, now that the round is theirs.
  for (const auto& [group_rank, session] : chosen.places) {
    std::optional<std::vector<ReportedFailure>>& report = held_resumes.at(session).report;
    if (!report || phase_ == Phase::kEnded) continue;
    if (report->empty()) {
      ReportSuccess(session, numbers.round, now);
    } else {
      ReportFailure(session, numbers.round, std::move(*report), now);
    }
  }
  if (round_ != numbers.round || phase_ == Phase::kGathering || phase_ == Phase::kEnded) {
    // A failure reported meanwhile ended the round at once: its store opens for no one.
    outbound_.erase(std::remove_if(outbound_.begin(), outbound_.end(),
                                   [&](const Outbound& o) {
                                     return o.kind == Outbound::Kind::kOpenStore &&
                                            o.store_round == numbers.round;
                                   }),
                    outbound_.end());
  }
}

void RoundStateMachine::LoseTakenUpRound(const HeldRound& held, absl::Time now) {
  const Assignment& numbers = held.numbers;
  constexpr size_t kNamed = 8;  // the missing group ranks named; the rest are counted
  std::vector<int> missing;
  for (int rank = 0; rank < numbers.group_world_size && missing.size() < kNamed; ++rank) {
    if (held.places.count(rank) == 0) missing.push_back(rank);
  }
  const size_t missing_count = numbers.group_world_size - held.places.size();
  const std::string why = absl::StrCat(
      "round ", numbers.round, " was not taken up by the restarted master: group rank",
      missing_count == 1 ? " " : "s ", absl::StrJoin(missing, ", "),
      missing_count > kNamed ? absl::StrCat(" and ", missing_count - kNamed, " more") : "",
      " did not come back within ", absl::FormatDuration(ReconnectGrace()));
  // What the nodes that came back agree on carries over: the rounds go on from it, and the
  // restarts it had spent stay spent.
  RoundRecord& record = CarryOver(numbers, now - ReconnectGrace());
  record.ended = now;
  record.ended_by = why;
  for (SessionId s : previous_members_) {
    if (auto it = nodes_.find(s); it != nodes_.end()) nodes_.SetPreviousMember(it->second, false);
  }
  previous_members_.clear();
  for (const auto& [group_rank, session] : held.places) {
    if (nodes_.count(session) == 0) continue;
    const NodeInfo node = nodes_.at(session).info;
    (void)StopStale(session, node, now, why);
    // As after any round that lost a member: once those that came back have joined again,
    // the next round begins at once, in their order.
    nodes_.SetPreviousMember(nodes_.at(session), true);
    previous_members_.push_back(session);
  }
  gathering_since_ = now;
}

}  // namespace ddprun
