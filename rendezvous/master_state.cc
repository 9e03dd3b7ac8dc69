#include "rendezvous/master_state.h"

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "rendezvous/node_address.h"
#include "rendezvous/session_service.h"
#include "rendezvous/wire.h"

namespace ddprun {

namespace pb = ::ddprun::v1;

absl::Status MasterState::OnAgentMessage(SessionReactor* reactor, const pb::AgentMessage& message) {
  absl::ReleasableMutexLock lock(&mu_);
  const absl::Time now = MonotonicNow();
  absl::Status status = CheckLimits(message);
  if (!status.ok()) {
    // refused below, before it touches any run
  } else if (reactor->evicted) {
    // ABORTED, as the eviction itself: the agent takes it for a lost session and rejoins.
    status =
        absl::AbortedError("the master dropped this session; the agent joins again on a new one");
  } else if (message.has_join()) {
    status = Join(reactor, message.join());
  } else if (!reactor->joined) {
    status = absl::FailedPreconditionError("the first message of a session must be a join");
  } else {
    Run& run = runs_[reactor->run_id];
    if (message.has_heartbeat()) {
      run.rounds->Heartbeat(reactor->id(), now);
    } else if (message.has_report()) {
      const pb::WorkerReport& report = message.report();
      if (report.succeeded()) {
        run.rounds->ReportSuccess(reactor->id(), report.round(), now);
      } else {
        run.rounds->ReportFailure(reactor->id(), report.round(), FromWire(report.failures()), now);
      }
    }
  }
  if (reactor->joined && !reactor->evicted) {  // an evicted session's run may be gone
    Run& run = runs_[reactor->run_id];
    Dispatch(run);
    WakeTickerBefore(run.rounds->NextDeadline());
  }
  ReleaseAndRunPending(lock);
  return status;
}

absl::Status MasterState::Join(SessionReactor* reactor, const pb::Join& join) {
  if (join.version() != pb::PROTOCOL_VERSION_2) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the agent speaks rendezvous protocol version ", join.version(),
        " but this master speaks version 2: run the same ddprun version on every node and "
        "on ddprun-master"));
  }
  if (!options_.token.empty() && join.token() != options_.token) {
    return absl::PermissionDeniedError(
        join.token().empty()
            ? "this master requires a join token and none was given: set the same token on "
              "every node with --rdzv-conf token_file=PATH or DDPRUN_RDZV_TOKEN"
            : "the join token does not match the master's: check --rdzv-conf token_file or "
              "DDPRUN_RDZV_TOKEN on this node");
  }
  if (options_.only_run_id && join.run_id() != *options_.only_run_id) {
    return absl::NotFoundError(absl::StrCat("this master serves run '", *options_.only_run_id,
                                            "', not '", join.run_id(),
                                            "': use the same --rdzv-id on every node"));
  }
  if (reactor->joined && join.run_id() != reactor->run_id) {
    return absl::InvalidArgumentError("a session cannot change its run id");
  }
  Run& run = runs_[join.run_id()];
  const RendezvousSettings settings = FromWire(join.settings());
  if (!run.rounds) {
    run.rounds.emplace(settings, MonotonicNow());
  } else if (absl::Status same = SameJobSettings(run.rounds->settings(), settings); !same.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(join.node().host(), ": ", same.message()));
  }
  NodeInfo node = NodeFromJoin(join);
  absl::StatusOr<std::string> reachable = ReachableAddress(node, reactor->peer());
  if (!reachable.ok()) return reachable.status();
  node.addr = *reachable;
  if (absl::Status s = run.rounds->Join(reactor->id(), node, MonotonicNow()); !s.ok()) return s;
  reactor->run_id = join.run_id();
  reactor->joined = true;
  run.sessions[reactor->id()] = reactor;
  return absl::OkStatus();
}

void MasterState::OnSessionClosed(SessionReactor* reactor) {
  absl::ReleasableMutexLock lock(&mu_);
  if (reactor->joined) {
    auto it = runs_.find(reactor->run_id);
    if (it != runs_.end() && it->second.sessions.erase(reactor->id()) > 0) {
      it->second.rounds->Disconnect(reactor->id(), MonotonicNow());
      Dispatch(it->second);
      WakeTickerBefore(it->second.rounds->NextDeadline());
    }
    SessionEnded(reactor->run_id);  // also after an eviction, which dropped it already
  }
  ReleaseAndRunPending(lock);
}

void MasterState::Dispatch(Run& run) {
  for (Outbound& out : run.rounds->TakeOutbound()) {
    if (out.kind == Outbound::Kind::kAssign && out.assignment.round != run.store_round) {
      // A new round: the store starts empty, and reads still waiting belong to the old one.
      run.store.AbortAll(
          absl::AbortedError(absl::StrCat("the round ended while waiting for store keys (round ",
                                          out.assignment.round, " has begun)")));
      TakeStoreCompletions(run);
      run.store = KvStore();
      run.store_generation = NextStoreGeneration();
      run.store_round = out.assignment.round;
    }
    auto it = run.sessions.find(out.session);
    if (it == run.sessions.end()) continue;  // gone; the state machine knows by now
    if (out.kind == Outbound::Kind::kEvict) {
      SessionReactor* reactor = it->second;
      reactor->evicted = true;
      run.sessions.erase(it);  // the state machine has forgotten it already
      reactor->Close(grpc::Status(grpc::StatusCode::ABORTED, out.detail));
      const uint64_t one = 1;
      (void)!::write(session_end_fd_, &one, sizeof one);
      continue;
    }
    it->second->Send(ToWire(out));
  }
}

void MasterState::SessionEnded(const std::string& run_id) {
  const uint64_t one = 1;
  (void)!::write(session_end_fd_, &one, sizeof one);
  // An ended run is forgotten once its last agent has gone, so that a long-lived
  // ddprun-master does not grow with every job, and a job started again under the same
  // --rdzv-id (a requeued Slurm job) gets a fresh run.
  auto it = runs_.find(run_id);
  if (it == runs_.end() || !it->second.sessions.empty() || !it->second.rounds ||
      it->second.rounds->phase() != RoundStateMachine::Phase::kEnded) {
    return;
  }
  it->second.store.AbortAll(absl::AbortedError("the run has ended"));
  TakeStoreCompletions(it->second);
  runs_.erase(it);
}

void MasterState::TakeStoreCompletions(Run& run) {
  for (auto& completion : run.store.TakeCompletions()) pending_.push_back(std::move(completion));
}

void MasterState::ReleaseAndRunPending(absl::ReleasableMutexLock& lock) {
  std::vector<std::function<void()>> pending;
  pending.swap(pending_);
  lock.Release();
  for (auto& completion : pending) completion();
}

MasterState::ParkedRead MasterState::StoreWait(const std::string& run_id,
                                               std::vector<std::string> keys, absl::Time deadline,
                                               KvStore::Done done) {
  absl::ReleasableMutexLock lock(&mu_);
  ParkedRead parked;
  if (store_closed_) {
    pending_.push_back(
        [done = std::move(done)] { done(absl::UnavailableError("the store is shutting down")); });
  } else {
    Run& run = runs_[run_id];
    parked.generation = run.store_generation;
    parked.waiter = run.store.WaitFor(std::move(keys), deadline, std::move(done));
    TakeStoreCompletions(run);
    WakeTickerBefore(deadline);
  }
  ReleaseAndRunPending(lock);
  return parked;
}

bool MasterState::CancelStoreWait(const std::string& run_id, const ParkedRead& read) {
  if (read.waiter == 0) return false;
  absl::MutexLock lock(&mu_);
  auto it = runs_.find(run_id);
  if (it == runs_.end() || it->second.store_generation != read.generation) return false;
  return it->second.store.Cancel(read.waiter);
}

void MasterState::TickerLoop() {
  mu_.Lock();
  while (!stopping_) {
    const absl::Time now = MonotonicNow();
    absl::Time next = now + absl::Hours(1);
    for (auto& [id, run] : runs_) {
      if (run.rounds) {
        run.rounds->Tick(now);
        Dispatch(run);
        next = std::min(next, run.rounds->NextDeadline());
      }
      run.store.Expire(now);
      TakeStoreCompletions(run);
      next = std::min(next, run.store.NextDeadline());
    }
    if (!pending_.empty()) {
      std::vector<std::function<void()>> pending;
      pending.swap(pending_);
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
