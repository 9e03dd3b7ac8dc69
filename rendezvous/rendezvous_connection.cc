#include "rendezvous/rendezvous_connection.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <mutex>

#include "common/clock.h"

namespace ddprun {

struct EventQueue::State {
  std::mutex mu;
  std::vector<RendezvousEvent> events;
};

EventQueue::EventQueue() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)), state_(new State) {}

EventQueue::~EventQueue() {
  if (fd_ >= 0) ::close(fd_);
  delete state_;
}

void EventQueue::Push(RendezvousEvent event) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->events.push_back(std::move(event));
  }
  const uint64_t one = 1;
  (void)!::write(fd_, &one, sizeof(one));
}

void EventQueue::Wake() {
  const uint64_t one = 1;
  (void)!::write(fd_, &one, sizeof(one));
}

std::vector<RendezvousEvent> EventQueue::Take() {
  uint64_t count;
  (void)!::read(fd_, &count, sizeof(count));  // clears readability; events may follow at once
  std::lock_guard<std::mutex> lock(state_->mu);
  std::vector<RendezvousEvent> out;
  out.swap(state_->events);
  return out;
}

RendezvousEvent::Kind LossOrRefusal(const absl::Status& status) {
  const bool refused = absl::IsPermissionDenied(status) || absl::IsNotFound(status) ||
                       absl::IsFailedPrecondition(status) || absl::IsInvalidArgument(status) ||
                       absl::IsUnimplemented(status);
  return refused ? RendezvousEvent::Kind::kRefused : RendezvousEvent::Kind::kLost;
}

std::vector<RendezvousEvent> EventsFor(SessionId session, std::vector<Outbound> outbound) {
  std::vector<RendezvousEvent> events;
  for (Outbound& out : outbound) {
    if (out.session != session) continue;
    RendezvousEvent event;
    switch (out.kind) {
      case Outbound::Kind::kAssign:
        event.kind = RendezvousEvent::Kind::kAssigned;
        event.assignment = out.assignment;
        break;
      case Outbound::Kind::kStop:
        event.kind = RendezvousEvent::Kind::kStop;
        event.stop_reason = out.stop_reason;
        event.detail = std::move(out.detail);
        event.next = std::move(out.next);
        break;
      case Outbound::Kind::kEnd:
        event.kind = RendezvousEvent::Kind::kEnd;
        event.outcome = out.outcome;
        event.detail = std::move(out.detail);
        event.root_cause = std::move(out.root_cause);
        event.excluded = std::move(out.excluded);
        break;
      case Outbound::Kind::kExclude:
        event.kind = RendezvousEvent::Kind::kExcluded;
        event.detail = std::move(out.detail);
        event.cooldown = out.cooldown;
        break;
      case Outbound::Kind::kOpenStore:
        event.kind = RendezvousEvent::Kind::kStoreOpen;
        event.store_round = out.store_round;
        break;
      case Outbound::Kind::kResumed:
        event.kind = RendezvousEvent::Kind::kResumed;
        event.store_round = out.store_round;
        break;
      case Outbound::Kind::kEvict:
        event.kind = RendezvousEvent::Kind::kLost;
        event.status = absl::AbortedError(out.detail);
        break;
    }
    events.push_back(std::move(event));
  }
  return events;
}

namespace {

RendezvousSettings OneNode(RendezvousSettings settings) {
  settings.min_nodes = 1;
  settings.max_nodes = 1;
  // One node talks to itself: nothing can go silent, and the run ends with its workers.
  settings.keep_alive_interval = absl::Hours(24 * 365);
  settings.exit_barrier_timeout = absl::ZeroDuration();
  return settings;
}

absl::Time Now() { return MonotonicNow(); }

}  // namespace

LocalRendezvous::LocalRendezvous(const RendezvousSettings& settings)
    : rounds_(OneNode(settings), Now()) {}

LocalRendezvous::LocalRendezvous(int max_restarts)
    : LocalRendezvous([max_restarts] {
        RendezvousSettings settings;
        settings.max_restarts = max_restarts;
        return settings;
      }()) {}

void LocalRendezvous::Join(const NodeInfo& node) {
  absl::Status status = rounds_.Join(kSelf, node, Now());
  if (!status.ok()) {
    RendezvousEvent refused;
    refused.kind = LossOrRefusal(status);
    refused.status = status;
    events_.Push(std::move(refused));
  }
  Publish();
}

void LocalRendezvous::ReportFailure(int64_t round, std::vector<ReportedFailure> failures) {
  rounds_.ReportFailure(kSelf, round, std::move(failures), Now());
  Publish();
}

void LocalRendezvous::ReportSuccess(int64_t round) {
  rounds_.ReportSuccess(kSelf, round, Now());
  Publish();
}

void LocalRendezvous::ReportStopped(int64_t round) {
  rounds_.ReportStopped(kSelf, round);
  Publish();
}

void LocalRendezvous::Publish() {
  for (RendezvousEvent& event : EventsFor(kSelf, rounds_.TakeOutbound())) {
    events_.Push(std::move(event));
  }
}

}  // namespace ddprun
