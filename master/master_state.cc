#include "master/master_state.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/ip_address.h"
#include "common/printable.h"
#include "common/random_id.h"
#include "common/status_macros.h"
#include "rendezvous/node_address.h"
#include "rendezvous/run_access.h"
#include "rpc/wire.h"
#include "spdlog/spdlog.h"

namespace ddprun {

namespace pb = ::ddprun::v1;

absl::Status MasterState::OnAgentMessage(Session* session, const pb::AgentMessage& message) {
  absl::ReleasableMutexLock lock(&mu_);
  const absl::Time now = MonotonicNow();
  absl::Status status = CheckLimits(message);
  if (!status.ok()) {
    // refused below, before it touches any run
  } else if (session->evicted) {
    // ABORTED, as the eviction itself: the agent takes it for a lost session and rejoins.
    status =
        absl::AbortedError("the master dropped this session; the agent joins again on a new one");
  } else if (message.has_join()) {
    status = Join(session, message.join());
  } else if (!session->joined) {
    status = absl::FailedPreconditionError("the first message of a session must be a join");
  } else {
    Run& run = runs_.at(session->run_id);
    if (message.has_heartbeat()) {
      run.rounds->Heartbeat(session->id(), now);
      if (message.heartbeat().want_gathering()) SendGathering(run, *session, now);
    } else if (message.has_report()) {
      const pb::WorkerReport& report = message.report();
      if (report.succeeded()) {
        run.rounds->ReportSuccess(session->id(), report.round(), now);
      } else {
        run.rounds->ReportFailure(session->id(), report.round(), FromWire(report.failures()), now);
      }
    } else if (message.has_stopped()) {
      run.rounds->ReportStopped(session->id(), message.stopped().round());
    } else if (message.has_restart()) {
      run.rounds->RestartExplained(session->id(), FromWire(message.restart()));
    } else if (message.has_stacks()) {
      MergeHangReport(run, *session, message.stacks());
    } else if (message.has_outage()) {
      run.rounds->OutageExplained(session->id(), message.outage().round(),
                                  absl::Milliseconds(message.outage().lost_ms()));
    } else if (message.has_bye()) {
      run.rounds->Bye(session->id(), now);
    } else if (message.has_leave()) {
      spdlog::warn("run '{}': {} leaves the run: {}", run.id, session->peer(),
                   Printable(message.leave().reason()));
      run.rounds->Leave(session->id(), message.leave().reason(), MonotonicNow());
    }
  }
  if (session->joined && !session->evicted) {  // an evicted session's run may be gone
    Run& run = runs_.at(session->run_id);
    Dispatch(run);
    WakeTickerBefore(run.rounds->NextDeadline());
  }
  if (!status.ok()) LogRefusal(*session, status);
  ReleaseAndRunPending(lock);
  return status;
}

void MasterState::SendGathering(Run& run, Session& session, absl::Time now) {
  if (!run.rounds->IsWaiting(session.id())) return;  // it runs, or its round began already
  if (now - session.gathering_told < absl::Seconds(1)) return;
  session.gathering_told = now;
  if (now - run.gathering_at >= absl::Seconds(1)) {
    run.gathering = run.rounds->GatheringProgress(now);
    run.gathering_at = now;
  }
  pb::MasterMessage out;
  out.mutable_gathering()->set_text(run.gathering);
  session.Send(std::move(out));
}

absl::Status MasterState::OnSessionOpened(Session* session) {
  absl::MutexLock lock(&mu_);
  int& on_connection = unjoined_by_peer_[session->peer()];
  if (on_connection >= options_.limits.max_unjoined_streams_per_connection) {
    const absl::Status refused = absl::ResourceExhaustedError(
        absl::StrCat("this connection has ", on_connection,
                     " sessions open that have not joined yet, the most one connection may have"));
    LogRefusal(*session, refused);
    return refused;
  }
  ++on_connection;
  const absl::Time deadline = MonotonicNow() + options_.limits.join_deadline;
  unjoined_[session->id()] = {deadline, session};
  WakeTickerBefore(deadline);
  return absl::OkStatus();
}

MasterState::Unjoined::iterator MasterState::ForgetUnjoined(Unjoined::iterator it) {
  auto on_connection = unjoined_by_peer_.find(it->second.second->peer());
  if (on_connection != unjoined_by_peer_.end() && --on_connection->second <= 0) {
    unjoined_by_peer_.erase(on_connection);
  }
  return unjoined_.erase(it);
}

void MasterState::ForgetUnjoined(SessionId id) {
  if (auto it = unjoined_.find(id); it != unjoined_.end()) ForgetUnjoined(it);
}

void MasterState::LogRefusal(const Session& session, const absl::Status& why) {
  const absl::Time now = MonotonicNow();
  if (now - refusal_window_ >= absl::Seconds(1)) {
    if (refusals_unlogged_ > 0) {
      spdlog::warn("{} more refused sessions were not logged", refusals_unlogged_);
    }
    refusal_window_ = now;
    refusals_logged_ = 0;
    refusals_unlogged_ = 0;
  }
  if (++refusals_logged_ > 5) {
    ++refusals_unlogged_;
    return;
  }
  // WARNING: the node that hosts the master runs at that level, and must say whom it turned
  // away (a node started with another --nnodes is refused at once on its own side only).
  spdlog::warn("refused a session from {}: {}", session.peer(), Printable(why.message()));
}

// The caller showed the token (or the job has none), as `ddprun status` does: it may know
// which run this master serves.
std::string MasterState::AnotherJobsMaster(const std::string& run_id) const {
  const std::string& served = *options_.only_run_id;
  std::string what = "no node has joined it yet";
  if (auto it = runs_.find(served); it != runs_.end()) {
    const Run& run = it->second;
    const RoundStateMachine& rounds = *run.rounds;
    using Phase = RoundStateMachine::Phase;
    const std::string now = rounds.phase() == Phase::kEnded ? "it has ended"
                            : rounds.phase() == Phase::kGathering
                                ? absl::StrCat("gathering round ", rounds.round() + 1, " with ",
                                               run.sessions.size(), " node(s) joined")
                                : absl::StrCat("running round ", rounds.round(), " on ",
                                               rounds.members().size(), " node(s)");
    what = absl::StrCat(
        "since ", absl::FormatTime("%Y-%m-%d %H:%M:%S %Z", run.created_wall, absl::UTCTimeZone()),
        " (", absl::FormatDuration(absl::Floor(absl::Now() - run.created_wall, absl::Seconds(1))),
        " ago), ", now);
  }
  return absl::StrCat("this port's rendezvous master runs another job: run '", served, "', ", what,
                      ". This node asked for run '", run_id,
                      "': if it is of that job, give it --rdzv-id=", served,
                      " as on that job's nodes; if it is another job, give that job a port "
                      "of its own (--rdzv-endpoint=HOST:PORT with a free PORT) or its own master");
}

absl::Status MasterState::Join(Session* session, const pb::Join& join) {
  if (join.version() != pb::PROTOCOL_VERSION_2) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the agent speaks rendezvous protocol version ", join.version(),
        " but this master speaks version 2: run the same ddprun version on every node and "
        "on ddprun-master"));
  }
  DDPRUN_RETURN_IF_ERROR(CheckToken(options_.token, join.token(), "join token",
                                    "set the same token on every node with --rdzv-conf "
                                    "token_file=PATH or DDPRUN_RDZV_TOKEN"));
  DDPRUN_RETURN_IF_ERROR(CheckRunId(join.run_id(), "join.run_id"));
  if (options_.only_run_id && join.run_id() != *options_.only_run_id) {
    return absl::NotFoundError(AnotherJobsMaster(join.run_id()));
  }
  if (session->joined && join.run_id() != session->run_id) {
    return absl::InvalidArgumentError("a session cannot change its run id");
  }
  const RendezvousSettings settings = FromWire(join.settings());
  if (options_.run_settings) {
    if (absl::Status same = SameRunSettings(*options_.run_settings, settings); !same.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(join.node().host(), ": ", same.message()));
    }
  }
  auto found = runs_.find(join.run_id());
  if (found == runs_.end()) {
    if (static_cast<int>(runs_.size()) >= options_.limits.max_runs) {
      return absl::ResourceExhaustedError(
          absl::StrCat("this master holds ", runs_.size(),
                       " runs, the most it holds at once: wait for some "
                       "to end (a run with no agent left is forgotten after ",
                       absl::FormatDuration(options_.limits.idle_run_ttl), ")"));
    }
    found = runs_.emplace(join.run_id(), Run()).first;
    found->second.id = join.run_id();
    found->second.created_wall = absl::Now();
    found->second.rounds.emplace(options_.run_settings.value_or(settings), MonotonicNow(),
                                 RandomId());
    if (options_.recalled && options_.only_run_id == join.run_id()) {
      found->second.rounds->Recall(*options_.recalled, MonotonicNow());
    }
    found->second.idle_since = MonotonicNow();
    WakeTickerBefore(found->second.idle_since + options_.limits.idle_run_ttl);
  } else if (absl::Status same = SameJobSettings(found->second.rounds->settings(), settings);
             !same.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(join.node().host(), ": ", same.message()));
  }
  Run& run = found->second;
  NodeInfo node = NodeFromJoin(join);
  absl::StatusOr<std::string> reachable = ReachableAddress(node, session->peer());
  if (!reachable.ok()) return reachable.status();
  node.addr = *reachable;
  node.seen_from = CanonicalIp(PeerAddress(session->peer()));
  // Its workers may reach group rank 0 from the address its session came from (a NAT).
  for (const std::string& a : {node.seen_from, CanonicalIp(node.addr)}) {
    if (!a.empty() && !IsLoopbackOrUnspecified(a) &&
        std::find(node.addresses.begin(), node.addresses.end(), a) == node.addresses.end()) {
      node.addresses.push_back(a);
    }
  }
  DDPRUN_RETURN_IF_ERROR(CheckPlacesHeld(*run.rounds, node));
  DDPRUN_RETURN_IF_ERROR(run.rounds->Join(session->id(), node, MonotonicNow()));
  if (run.rounds->phase() == RoundStateMachine::Phase::kRunning &&
      run.rounds->IsWaiting(session->id())) {
    spdlog::info("run '{}': {} waits for a place: the job runs at its --nnodes maximum ({})",
                 run.id, node.host, run.rounds->settings().max_nodes);
  }
  session->run_id = join.run_id();
  session->joined = true;
  ForgetUnjoined(session->id());
  run.sessions[session->id()] = session;
  return absl::OkStatus();
}

absl::Status MasterState::CheckPlacesHeld(const RoundStateMachine& rounds,
                                          const NodeInfo& node) const {
  if (!rounds.WouldTakeUp(node)) return absl::OkStatus();
  int held = 0;  // O(runs), only for a resume that takes a round up
  for (const auto& [id, run] : runs_) {
    if (run.rounds && &*run.rounds != &rounds) held += run.rounds->placeholders();
  }
  // This run holds the most any round its resumes name has: one more resume of the same
  // round holds no more.
  held += std::max(rounds.placeholders(), node.resume->group_world_size);
  if (held <= options_.limits.max_places_held) {
    return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "taking round ", node.resume->round, " up would hold ", node.resume->group_world_size,
      " places for nodes not back yet, past the ", options_.limits.max_places_held,
      " this master holds over every run: wait for the nodes of other runs to come back"));
}

void MasterState::OnSessionClosed(Session* session) {
  absl::ReleasableMutexLock lock(&mu_);
  ForgetUnjoined(session->id());
  if (session->joined) {
    auto it = runs_.find(session->run_id);
    if (it != runs_.end() && it->second.sessions.erase(session->id()) > 0) {
      it->second.rounds->Disconnect(session->id(), MonotonicNow());
      // A killed agent's kernel closes its session's socket, then its store's: look a moment
      // later, so that one look tells.
      ProbeSoon(it->second, session->id(), kFirstProbeAfter);
      Dispatch(it->second);
      WakeTickerBefore(it->second.rounds->NextDeadline());
    }
    SessionEnded(session->run_id);  // also after an eviction, which dropped it already
  }
  ReleaseAndRunPending(lock);
}

void MasterState::ProbeAwayAgent(const Run& run, SessionId session) {
  const std::optional<std::pair<std::string, int>> store = run.rounds->AwayAgentStore(session);
  const absl::Time now = MonotonicNow();
  // The agent's own host answers within its round trip; a path that is down, not at all.
  if (!store) {
    probed_runs_.erase(session);  // back, or gone
  } else if (away_probes_.in_flight() >= TcpProbes::kMaxInFlight) {
    reprobes_.insert({now + kReprobeEvery, session});  // many at once: in turn
  } else if (away_probes_.Start(session, store->first, store->second, now, absl::Seconds(1))) {
    WakeTickerBefore(away_probes_.NextPoll(now));
  } else {
    probed_runs_.erase(session);
  }
}

void MasterState::ProbeSoon(const Run& run, SessionId session, absl::Duration after) {
  if (!run.rounds->AwayAgentStore(session)) return;
  probed_runs_[session] = run.id;
  const absl::Time at = MonotonicNow() + after;
  reprobes_.insert({at, session});
  WakeTickerBefore(at);
}

absl::Time MasterState::ProbeAnswers(absl::Time now) {
  for (const TcpProbes::Done& done : away_probes_.Poll(now)) {
    auto probed = probed_runs_.find(done.id);
    if (probed == probed_runs_.end()) continue;
    auto run = runs_.find(probed->second);
    if (run == runs_.end()) {
      probed_runs_.erase(probed);
    } else if (done.answer == TcpProbes::Answer::kRefused) {
      probed_runs_.erase(probed);
      run->second.rounds->AgentGone(done.id, now);
      Dispatch(run->second);
    } else {
      // Its store still answers (or nobody does): look again while its place is held.
      reprobes_.insert({now + kReprobeEvery, done.id});
    }
  }
  while (!reprobes_.empty() && reprobes_.begin()->first <= now) {
    const SessionId session = reprobes_.begin()->second;
    reprobes_.erase(reprobes_.begin());
    auto probed = probed_runs_.find(session);
    if (probed == probed_runs_.end()) continue;
    auto run = runs_.find(probed->second);
    if (run == runs_.end()) {
      probed_runs_.erase(probed);  // its run was forgotten
    } else {
      ProbeAwayAgent(run->second, session);
    }
  }
  absl::Time next = away_probes_.NextPoll(now);
  if (!reprobes_.empty()) next = std::min(next, reprobes_.begin()->first);
  return next;
}

void MasterState::Dispatch(Run& run) {
  ObserveRounds(run);
  if (options_.remember && run.rounds->memory_version() != run.remembered_version) {
    run.remembered_version = run.rounds->memory_version();
    options_.remember(run.id, run.rounds->Memory(MonotonicNow()));
  }
  bool said_stop = false, said_end = false;  // one line per change, not one per node
  for (Outbound& out : run.rounds->TakeOutbound()) {
    if (out.kind == Outbound::Kind::kStop && !std::exchange(said_stop, true)) {
      if (out.next) {
        spdlog::info(
            "run '{}': round {} stops: {}; round {} begins at once, the same nodes in "
            "the same order",
            run.id, out.next->round - 1, Printable(out.detail), out.next->round);
      } else {
        spdlog::info("run '{}': round {} stops: {}", run.id, run.rounds->round(),
                     Printable(out.detail));
      }
    } else if (out.kind == Outbound::Kind::kEnd && !std::exchange(said_end, true)) {
      spdlog::info("run '{}': ends: {}", run.id, Printable(out.detail));
      const uint64_t one = 1;  // an agent that serves this master for others may stop now
      (void)!::write(session_end_fd_, &one, sizeof one);
      for (const std::string& line : out.excluded) {
        spdlog::warn("run '{}': kept out: {}", run.id, Printable(line));
      }
    } else if (out.kind == Outbound::Kind::kExclude) {
      spdlog::warn("run '{}': {}", run.id, Printable(out.detail));
    }
    const Assignment* begun = out.kind == Outbound::Kind::kAssign ? &out.assignment
                              : out.next                          ? &*out.next
                                                                  : nullptr;
    if (begun != nullptr && begun->round != run.store_round) {
      // A new round: the store starts empty, and reads still waiting belong to the old one.
      stores_.Drop(run.id, absl::AbortedError(
                               absl::StrCat("the round ended while waiting for store keys (round ",
                                            begun->round, " has begun)")));
      run.store_round = begun->round;
    }
    auto it = run.sessions.find(out.session);
    if (it == run.sessions.end()) continue;  // gone; the state machine knows by now
    if (out.kind == Outbound::Kind::kEvict) {
      Session* session = it->second;
      session->evicted = true;
      run.sessions.erase(it);  // the state machine has forgotten it already
      spdlog::info("run '{}': evicted the session from {}: {}", session->run_id, session->peer(),
                   out.detail);
      session->Close(grpc::Status(grpc::StatusCode::ABORTED, out.detail));
      const uint64_t one = 1;
      (void)!::write(session_end_fd_, &one, sizeof one);
      continue;
    }
    it->second->Send(ToWire(out));
  }
}

void MasterState::MergeHangReport(Run& run, const Session& from, const pb::StackReport& message) {
  std::vector<RankStack> stacks = FromWire(message.stacks());
  // The round's own world size, never the one a node claims (2^30 made a 4 GiB vector).
  const std::optional<int> world_size = run.rounds->ClaimStacks(from.id(), message.round(), stacks);
  if (!world_size) return;  // not a member of the hung round: it speaks for no rank
  const absl::Time now = MonotonicNow();
  if (std::optional<HangReport> complete = run.hang_reports.Add(
          message.round(), *world_size, Printable(message.cause()), std::move(stacks), now)) {
    SendHangReport(run, *complete);
  }
  WakeTickerBefore(run.hang_reports.NextDeadline());
}

void MasterState::SendHangReport(Run& run, const HangReport& report) {
  spdlog::warn("run '{}': {}", run.id, FormatHangSummary(report));
  const pb::MasterMessage out = HangReportMessage(report);
  for (auto& [id, session] : run.sessions) session->Send(out);
}

void MasterState::SessionEnded(const std::string& run_id) {
  const uint64_t one = 1;
  (void)!::write(session_end_fd_, &one, sizeof one);
  // An ended run is forgotten once its last agent has gone, so that a long-lived
  // ddprun-master does not grow with every job, and a job started again under the same
  // --rdzv-id (a requeued Slurm job) gets a fresh run.
  auto it = runs_.find(run_id);
  if (it == runs_.end() || !it->second.sessions.empty()) return;
  it->second.idle_since = MonotonicNow();
  WakeTickerBefore(it->second.idle_since + options_.limits.idle_run_ttl);
  if (!it->second.rounds || it->second.rounds->phase() != RoundStateMachine::Phase::kEnded) {
    return;  // its agents may come back (a partition); forgotten after idle_run_ttl else
  }
  EraseRun(it, absl::AbortedError("the run has ended"));
}

absl::Time MasterState::ForgetIdle(absl::Time now) {
  absl::Time next = absl::InfiniteFuture();
  for (auto it = unjoined_.begin(); it != unjoined_.end();) {
    if (it->second.first > now) {
      next = std::min(next, it->second.first);
      ++it;
      continue;
    }
    it->second.second->Close(grpc::Status(
        grpc::StatusCode::DEADLINE_EXCEEDED,
        absl::StrCat("no join within ", absl::FormatDuration(options_.limits.join_deadline),
                     " of opening the session")));
    it = ForgetUnjoined(it);
  }
  for (auto it = runs_.begin(); it != runs_.end();) {
    Run& run = it->second;
    const absl::Time forget_at = run.idle_since + options_.limits.idle_run_ttl;
    if (!run.sessions.empty() || forget_at > now) {
      if (run.sessions.empty()) next = std::min(next, forget_at);
      ++it;
      continue;
    }
    spdlog::info("run '{}': forgotten, no agent has held a session in it for {}", it->first,
                 absl::FormatDuration(options_.limits.idle_run_ttl));
    it = EraseRun(it, absl::AbortedError("the run was forgotten: no agent is in it any more"));
    const uint64_t one = 1;
    (void)!::write(session_end_fd_, &one, sizeof one);
  }
  return next;
}

absl::Status MasterState::StoreAccess(absl::string_view token, const std::string& run_id) {
  DDPRUN_RETURN_IF_ERROR(CheckStoreAccess(options_.token, token, run_id, options_.only_run_id));
  if (runs_.count(run_id) == 0) {
    return absl::NotFoundError(absl::StrCat("no agent has joined run '", run_id,
                                            "' on this master: the Store of a run is there "
                                            "while its agents are"));
  }
  return absl::OkStatus();
}

absl::Status MasterState::WithStore(absl::string_view token, const std::string& run_id,
                                    absl::FunctionRef<absl::Status(KvStore&)> fn) {
  absl::ReleasableMutexLock lock(&mu_);
  absl::Status status = StoreAccess(token, run_id);
  if (status.ok()) status = stores_.Call(run_id, fn);
  ReleaseAndRunPending(lock);
  return status;
}

void MasterState::ReleaseAndRunPending(absl::ReleasableMutexLock& lock) {
  std::vector<std::function<void()>> pending = stores_.TakeCompletions();
  lock.Release();
  for (auto& completion : pending) completion();
}

ParkedRead MasterState::StoreWait(absl::string_view token, const std::string& peer,
                                  const std::string& run_id, std::vector<std::string> keys,
                                  absl::Time deadline, KvStore::Done done) {
  absl::ReleasableMutexLock lock(&mu_);
  ParkedRead parked;
  if (absl::Status access = StoreAccess(token, run_id); !access.ok()) {
    stores_.Refuse(std::move(done), access);
  } else {
    parked = stores_.Wait(run_id, peer, std::move(keys), MonotonicNow(), deadline, std::move(done));
    WakeTickerBefore(parked.deadline);
  }
  ReleaseAndRunPending(lock);
  return parked;
}

bool MasterState::CancelStoreWait(const std::string& run_id, const ParkedRead& read) {
  absl::MutexLock lock(&mu_);
  return stores_.Cancel(run_id, read);
}

void MasterState::TickerLoop() {
  mu_.Lock();
  while (!stopping_) {
    const absl::Time now = MonotonicNow();
    // First: a gone agent changes its run's deadlines, which the loop below reads.
    absl::Time next = std::min(now + absl::Hours(1), ProbeAnswers(now));
    for (auto& [id, run] : runs_) {
      if (run.rounds) {
        run.rounds->Tick(now);
        Dispatch(run);
        next = std::min(next, run.rounds->NextDeadline());
      }
      for (const HangReport& due : run.hang_reports.TakeDue(now)) SendHangReport(run, due);
      next = std::min(next, run.hang_reports.NextDeadline());
    }
    stores_.Expire(now);
    next = std::min(next, stores_.NextDeadline());
    next = std::min(next, ForgetIdle(now));
    if (std::vector<std::function<void()>> pending = stores_.TakeCompletions(); !pending.empty()) {
      mu_.Unlock();
      for (auto& completion : pending) completion();
      mu_.Lock();
      continue;
    }
    ticker_wakes_at_ = next;
    wake_.WaitWithTimeout(&mu_, std::max(next - MonotonicNow(), absl::Milliseconds(1)));
    ticker_wakes_at_ = absl::InfinitePast();  // awake: it looks at every run anyway
  }
  mu_.Unlock();
}

}  // namespace ddprun
