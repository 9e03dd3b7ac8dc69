#include "rendezvous/leader_election.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/ip_address.h"
#include "common/printable.h"

namespace ddprun {
namespace {

// A host name (255 bytes at most), ':' and a port, an IPv6 address in brackets.
constexpr size_t kMaxLeaderValue = 1 + 255 + 1 + 1 + 5;

// At most the first 64 bytes of a value read from the store, made printable, for a log line.
std::string Shown(absl::string_view value) {
  constexpr size_t kShown = 64;
  return value.size() <= kShown
             ? Printable(value)
             : absl::StrCat(Printable(value.substr(0, kShown)), "... (", value.size(), " bytes)");
}

// The store refused this node: asking again will not change that (a wrong password, a
// certificate neither side trusts, no rights).
bool Refusal(const absl::Status& status) {
  return absl::IsPermissionDenied(status) || absl::IsUnauthenticated(status);
}

// A killed agent's kernel closes its sessions' sockets, then its store's listening one: a
// first look a moment after the master was lost, and two more while the port still listens.
constexpr absl::Duration kProbeAfter[] = {absl::Milliseconds(20), absl::Milliseconds(250),
                                          absl::Seconds(1)};

ElectionAction Act(ElectionAction::Kind kind) {
  ElectionAction action;
  action.kind = kind;
  return action;
}

}  // namespace

const char* ElectionRoleName(ElectionRole role) {
  switch (role) {
    case ElectionRole::kReading:
      return "reading";
    case ElectionRole::kFollowing:
      return "following";
    case ElectionRole::kCampaigning:
      return "campaigning";
    case ElectionRole::kLeading:
      return "leading";
    case ElectionRole::kOver:
      return "over";
  }
  return "?";
}

absl::Status CheckLeaderAddress(absl::string_view value) {
  const auto refused = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("its value '", Shown(value), "' is not a leader's address (", why, ")"));
  };
  if (value.size() > kMaxLeaderValue) {
    return refused(absl::StrCat("longer than ", kMaxLeaderValue, " bytes"));
  }
  const size_t colon = value.rfind(':');
  if (colon == absl::string_view::npos) return refused("no :PORT");
  absl::string_view host = value.substr(0, colon);
  int port = 0;
  if (!absl::SimpleAtoi(value.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return refused("the port is not 1-65535");
  }
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
    return refused("an IPv6 address without its closing ]");
  }
  if (!IsHostOrAddressText(host)) return refused("not a host name or an IP address");
  return absl::OkStatus();
}

LeaderElection::LeaderElection(ElectionSettings settings) : settings_(std::move(settings)) {}

std::vector<ElectionAction> LeaderElection::TakeActions() { return std::exchange(actions_, {}); }

void LeaderElection::Log(LogLevel level, std::string text) {
  ElectionAction log;
  log.level = level;
  log.text = std::move(text);
  Emit(std::move(log));
}

void LeaderElection::Start(absl::Time now) { Elect(now); }

// ---- Reading: who leads? ----

void LeaderElection::Elect(absl::Time now) {
  retry_at_ = absl::InfiniteFuture();
  if (run_over_) {
    role_ = ElectionRole::kOver;  // no leader needed: the run is over here
    return;
  }
  role_ = ElectionRole::kReading;
  if (stale_lease_ != 0) {
    ElectionAction revoke = Act(ElectionAction::Kind::kRevoke);
    revoke.lease = stale_lease_;
    Emit(std::move(revoke));
  }
  // A read first: once a leader is elected, a node that starts or comes back follows it
  // without a lease and a transaction, which the store would have to commit (4,000 agents
  // starting at once: 2 s less, docs/performance.md).
  Emit(Act(ElectionAction::Kind::kRead));
  (void)now;
}

void LeaderElection::Revoked(int64_t lease, const absl::Status& revoked, absl::Time now) {
  // Revoked, or gone already (NotFound): either way the store answered.
  const bool answered = !absl::IsUnavailable(revoked) && !absl::IsDeadlineExceeded(revoked);
  if (answered && lease == stale_lease_) stale_lease_ = 0;
  if (Refusal(revoked)) Answered(revoked);
  (void)now;
}

void LeaderElection::LeaderRead(const absl::StatusOr<Read>& read, absl::Time now) {
  if (role_ != ElectionRole::kReading) return;
  if (!Answered(read.status())) return Retry(now);
  if (read->key) return Follow(*read->key, read->revision + 1);
  if (run_over_) {
    role_ = ElectionRole::kOver;
    return;
  }
  role_ = ElectionRole::kCampaigning;
  if (LeaseHeld(now)) {
    ElectionAction campaign = Act(ElectionAction::Kind::kCampaign);
    campaign.lease = lease_;
    return Emit(std::move(campaign));
  }
  Emit(Act(ElectionAction::Kind::kGrantLease));
}

void LeaderElection::Retry(absl::Time now) {
  if (role_ == ElectionRole::kOver) return;
  role_ = ElectionRole::kReading;
  retry_at_ = now + settings_.retry;
}

// ---- Campaigning ----

void LeaderElection::LeaseGranted(const absl::StatusOr<int64_t>& lease, absl::Time asked,
                                  absl::Time now) {
  if (role_ != ElectionRole::kCampaigning) return;
  if (!Answered(lease.status())) return Retry(now);
  lease_ = *lease;
  renewed_ = asked;
  KeepAlive(lease_);
  ElectionAction campaign = Act(ElectionAction::Kind::kCampaign);
  campaign.lease = lease_;
  Emit(std::move(campaign));
}

void LeaderElection::Campaigned(const absl::StatusOr<Campaign>& campaign, absl::Time now) {
  if (role_ != ElectionRole::kCampaigning) return;
  if (!Answered(campaign.status())) return Retry(now);
  leader_lease_ = campaign->holder.lease;
  if (campaign->won && !run_over_) {
    revision_ = campaign->holder.create_revision;
    ElectionAction host = Act(ElectionAction::Kind::kHost);
    host.revision = revision_;
    return Emit(std::move(host));
  }
  // Another node won the race (or the run ended meanwhile): a follower needs no lease, and
  // a key this node won for an ended run goes with it.
  ElectionAction revoke = Act(ElectionAction::Kind::kRevoke);
  revoke.lease = std::exchange(lease_, 0);
  KeepAlive(0);
  Emit(std::move(revoke));
  if (campaign->won) {
    role_ = ElectionRole::kOver;
    return;
  }
  Follow(campaign->holder, campaign->revision + 1);
}

void LeaderElection::Hosted(const absl::Status& hosted, const std::string& recalled,
                            absl::Time now) {
  if (role_ != ElectionRole::kCampaigning) return;
  if (!hosted.ok()) {
    Log(LogLevel::kError,
        absl::StrCat("this node was elected the leader of run '", settings_.run_id,
                     "' but cannot host its master: ", hosted.message()));
    // Another node leads instead: with this lease revoked, the key goes at once.
    ElectionAction revoke = Act(ElectionAction::Kind::kRevoke);
    revoke.lease = std::exchange(lease_, 0);
    KeepAlive(0);
    Emit(std::move(revoke));
    return Retry(now);
  }
  role_ = ElectionRole::kLeading;
  leader_lease_ = lease_;
  // This master remembers afresh: what the last one of this node's did not write is not its.
  written_version_ = memory_version_;
  writing_ = false;
  write_at_ = absl::InfinitePast();
  probe_.reset();
  Log(LogLevel::kInfo,
      absl::StrCat("this node leads run '", settings_.run_id, "' (", settings_.store, " revision ",
                   revision_, "): it hosts the rendezvous master at ", settings_.self,
                   recalled.empty() ? "" : ", ", recalled));
  FollowAddress(settings_.self);
  // Nothing of ddprun's rewrites the key while this node leads: any change is someone else's.
  Watch(revision_ + 1);
  MaybeWriteMemory(now);
}

// ---- Following ----

void LeaderElection::Follow(const LeaderKey& key, int64_t watch_from) {
  role_ = ElectionRole::kFollowing;
  leader_lease_ = key.lease;
  FollowValue(key.value);
  Watch(watch_from);
}

void LeaderElection::FollowValue(const std::string& value) {
  const absl::Status bad = CheckLeaderAddress(value);
  if (bad.ok()) return FollowAddress(value);
  if (refused_value_ != value) {
    refused_value_ = value;
    Log(LogLevel::kError,
        absl::StrCat("run '", settings_.run_id, "': ", settings_.store, "'s key ", settings_.key,
                     " is not the work of ddprun: ", bad.message(),
                     "; this node follows no leader until it holds one (whoever may write ",
                     settings_.prefix, " in ", settings_.store,
                     " wrote it: ", settings_.security_doc, ")"));
  }
  FollowAddress("");
}

void LeaderElection::FollowAddress(const std::string& address) {
  if (address == leader_) return;
  leader_ = address;
  if (!address.empty()) {
    Log(LogLevel::kInfo,
        absl::StrCat("run '", settings_.run_id, "': its leader's rendezvous master is at ", address,
                     " (", settings_.store, ")"));
  }
  ElectionAction follow = Act(ElectionAction::Kind::kFollow);
  follow.address = address;
  Emit(std::move(follow));
}

void LeaderElection::Watch(int64_t from) {
  ElectionAction watch = Act(ElectionAction::Kind::kWatch);
  watch.watch = watch_ = ++watches_;
  watch.revision = from;
  Emit(std::move(watch));
}

void LeaderElection::KeyChanged(int64_t watch, const KeyChange& change, absl::Time now) {
  if (watch != watch_) return;  // an earlier watch's last word
  if (role_ == ElectionRole::kLeading) {
    return StepDown(
        absl::StrCat("its election is over: ", settings_.key,
                     change.deleted ? std::string(" was deleted (not by ddprun)")
                                    : absl::StrCat(" was overwritten (not by ddprun) with '",
                                                   Shown(change.key.value), "'")),
        now);
  }
  if (role_ != ElectionRole::kFollowing) return;
  if (!change.deleted) {
    leader_lease_ = change.key.lease;
    return FollowValue(change.key.value);
  }
  watch_ = 0;  // a watch that saw its key go ends there
  if (run_over_) {
    role_ = ElectionRole::kOver;  // nothing to elect a leader for
    return;
  }
  Log(LogLevel::kWarning, absl::StrCat("run '", settings_.run_id, "': its leader left (its ",
                                       settings_.store, " key is gone): electing another"));
  probe_.reset();
  FollowAddress("");
  Elect(now);
}

void LeaderElection::WatchEnded(int64_t watch, const absl::Status& why, absl::Time now) {
  if (watch != watch_) return;
  watch_ = 0;
  // The member went away or lost its quorum: the executor asks another next.
  if (!why.ok() && !absl::IsCancelled(why)) Answered(why);
  if (role_ == ElectionRole::kLeading) {
    retry_at_ = now + settings_.retry;  // the key watched again then
    return;
  }
  if (role_ == ElectionRole::kFollowing) Retry(now);
}

// ---- Was the leader's agent killed? ----

void LeaderElection::MasterLost(absl::Time now) {
  if (probe_ || role_ != ElectionRole::kFollowing || leader_.empty() || leader_ == settings_.self ||
      leader_lease_ == 0) {
    return;  // one look at a time, at a leader that is another node
  }
  probe_ = Probe{leader_, leader_lease_, 0, now + kProbeAfter[0]};
}

void LeaderElection::LeaderProbed(const std::string& address, Reach reach,
                                  const std::string& detail, absl::Time now) {
  if (!probe_ || probe_->address != address) return;
  if (leader_ != address) {
    probe_.reset();  // a new leader is known
    return;
  }
  if (reach == Reach::kRefused) {
    // Nothing listens on the leader's store port, which its agent holds for its whole life:
    // the agent is gone, and its lease need not run out before another leads.
    Log(LogLevel::kWarning,
        absl::StrCat("run '", settings_.run_id, "': its leader at ", address,
                     " is gone (nothing listens there any more: ", detail, "); its ",
                     settings_.store, " lease is revoked so that another node leads now"));
    ElectionAction revoke = Act(ElectionAction::Kind::kRevoke);
    revoke.lease = probe_->lease;
    probe_.reset();
    return Emit(std::move(revoke));
  }
  if (reach == Reach::kUnreachable) {
    // Its host is out of reach: the member this node watches through may be on it, or
    // behind the same cut, and would never say that the key went. Watch through another.
    probe_.reset();
    return Emit(Act(ElectionAction::Kind::kSwitchWatch));
  }
  if (++probe_->step == static_cast<int>(std::size(kProbeAfter))) {
    probe_.reset();
    return;
  }
  probe_->at = now + kProbeAfter[probe_->step];
}

// ---- Leading ----

void LeaderElection::KeepAlive(int64_t lease) {
  ElectionAction keep = Act(ElectionAction::Kind::kKeepAlive);
  keep.lease = lease;
  Emit(std::move(keep));
}

void LeaderElection::LeaseRenewed(int64_t lease, absl::Time sent, bool expired, absl::Time now) {
  if (lease == 0 || lease != lease_) return;
  if (expired) {
    // The store let it expire: a leader steps down; a node that campaigns takes a new one.
    renewed_ = absl::InfinitePast();
    lease_ = 0;
    if (role_ == ElectionRole::kLeading)
      return StepDown(settings_.store + " let its lease expire", now);
    return KeepAlive(0);
  }
  renewed_ = std::max(renewed_, sent);
}

// A margin before the TTL runs out: the store counts it from when the renewal reached it,
// which is after it was sent, but a leader that stops at the last moment would still be
// stopping.
absl::Time LeaderElection::LeaseEnds() const {
  if (lease_ == 0) return absl::InfinitePast();
  const absl::Duration margin = std::min(settings_.lease_ttl / 10, absl::Milliseconds(500));
  return renewed_ + settings_.lease_ttl - margin;
}

bool LeaderElection::LeaseHeld(absl::Time now) const { return now < LeaseEnds(); }

void LeaderElection::MemoryChanged(int64_t version, absl::Time now) {
  memory_version_ = version;
  MaybeWriteMemory(now);
}

// The master's memory goes to the store, fenced by this node's election, at most every
// memory_every: the versions between coalesce.
void LeaderElection::MaybeWriteMemory(absl::Time now) {
  if (role_ != ElectionRole::kLeading || writing_ || memory_version_ == written_version_ ||
      now < write_at_) {
    return;
  }
  writing_ = true;
  ElectionAction write = Act(ElectionAction::Kind::kWriteMemory);
  write.version = memory_version_;
  write.revision = revision_;
  write.deadline = LeaseEnds();  // a write that waits longer would hold the step-down up
  Emit(std::move(write));
}

void LeaderElection::MemoryWritten(int64_t version, const absl::StatusOr<bool>& fenced,
                                   absl::Time now) {
  if (role_ != ElectionRole::kLeading || !writing_) return;
  writing_ = false;
  write_at_ = now + settings_.memory_every;
  if (!Answered(fenced.status())) return;  // tried again at write_at_
  if (!*fenced) {
    return StepDown(absl::StrCat("its election is over: ", settings_.key,
                                 " is not the key it created any more"),
                    now);
  }
  written_version_ = std::max(written_version_, version);
}

void LeaderElection::StepDown(const std::string& why, absl::Time now) {
  Log(LogLevel::kWarning,
      absl::StrCat("this node no longer leads run '", settings_.run_id, "' (", why,
                   "): its rendezvous master stops, and the nodes that reach ", settings_.store,
                   " elect another; the workers go on"));
  ElectionAction step_down = Act(ElectionAction::Kind::kStepDown);
  step_down.text = why;
  Emit(std::move(step_down));
  // Expired here, maybe not in the store (a store without its quorum lets no lease run out): it
  // is revoked once the store answers, so that the key goes then and not a TTL later.
  if (lease_ != 0) stale_lease_ = std::exchange(lease_, 0);
  KeepAlive(0);
  revision_ = 0;
  writing_ = false;
  watch_ = 0;
  FollowAddress("");
  Elect(now);
}

void LeaderElection::RunOver(absl::Time now) {
  run_over_ = true;
  // A follower waits for the key to go; a leader leads on (its agent ends the master). Every
  // call is answered before the next event, so a reader waits for its retry.
  if (role_ == ElectionRole::kReading) {
    role_ = ElectionRole::kOver;
    retry_at_ = absl::InfiniteFuture();
  }
  (void)now;
}

// ---- Time ----

absl::Time LeaderElection::NextDeadline() const {
  absl::Time next = retry_at_;
  if (probe_) next = std::min(next, probe_->at);
  if (lease_ != 0) {
    // No renewal for half the TTL: the keep-alive's member went silent (frozen, cut off).
    next = std::min(
        next, std::max(renewed_ + settings_.lease_ttl / 2, nudged_ + settings_.lease_ttl / 4));
  }
  if (role_ == ElectionRole::kLeading) {
    next = std::min(next, LeaseEnds());
    if (!writing_ && memory_version_ != written_version_) next = std::min(next, write_at_);
  }
  return next;
}

void LeaderElection::Tick(absl::Time now) {
  if (role_ == ElectionRole::kLeading && !LeaseHeld(now)) {
    return StepDown(renewed_ == absl::InfinitePast()
                        ? settings_.store + " let its lease expire"
                        : absl::StrCat(settings_.store, " has not renewed its lease for ",
                                       absl::FormatDuration(
                                           absl::Trunc(now - renewed_, absl::Milliseconds(1)))),
                    now);
  }
  if (lease_ != 0 && now >= renewed_ + settings_.lease_ttl / 2 &&
      now >= nudged_ + settings_.lease_ttl / 4) {
    // The keep-alive is ended so that it asks another member, before the lease runs out.
    nudged_ = now;
    Emit(Act(ElectionAction::Kind::kSwitchKeepAlive));
  }
  if (now >= retry_at_) {
    retry_at_ = absl::InfiniteFuture();
    if (role_ == ElectionRole::kReading || role_ == ElectionRole::kFollowing) {
      Elect(now);
    } else if (role_ == ElectionRole::kLeading && watch_ == 0) {
      Watch(revision_ + 1);
    }
  }
  if (probe_ && now >= probe_->at) {
    probe_->at = absl::InfiniteFuture();
    ElectionAction probe = Act(ElectionAction::Kind::kProbeLeader);
    probe.address = probe_->address;
    Emit(std::move(probe));
  }
  MaybeWriteMemory(now);
}

// ---- The store's answers ----

bool LeaderElection::Answered(const absl::Status& status) {
  if (status.ok()) {
    if (!problem_.empty()) Log(LogLevel::kWarning, settings_.store + " answers again");
    problem_.clear();
    return true;
  }
  if (Refusal(status)) {
    ElectionAction refused = Act(ElectionAction::Kind::kRefused);
    refused.text = std::string(status.message());
    Emit(std::move(refused));
    role_ = ElectionRole::kOver;  // nothing more to try
    retry_at_ = absl::InfiniteFuture();
    probe_.reset();
    return false;
  }
  if (problem_.empty()) {
    Log(LogLevel::kWarning,
        absl::StrCat(settings_.store, " does not answer (", status.message(),
                     "): this node asks again and again; workers that run go on, and the run's "
                     "membership waits until ",
                     settings_.store, " answers"));
  }
  problem_ = std::string(status.message());
  return false;
}

}  // namespace ddprun
