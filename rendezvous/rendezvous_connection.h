#pragma once
// The agent's side of a rendezvous: it joins, reports and heartbeats; the rendezvous answers
// with events (a round to run, an order to stop, the end of the run, a lost master). Events
// arrive on a file descriptor so the agent's single-threaded event loop can wait on them
// with everything else. Two implementations: LocalRendezvous (one-node jobs, in-process)
// and GrpcRendezvous (a master over the network).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "rendezvous/restart_split.h"
#include "rendezvous/round_state_machine.h"
#include "rendezvous/stack_report.h"

namespace ddprun {

struct RendezvousEvent {
  // kLost: the master is out of reach, for now (the agent reconnects). kRefused: the
  // rendezvous will not take this node (wrong token or run, the run has ended, a bad field):
  // trying again would not change that.
  // kHangReport: every node's stacks of a hang so far (see stack_report.h), as text.
  // kExcluded: the rendezvous keeps this node out for `cooldown` (node_health.h).
  // kProgress: how the wait for a round goes (`detail`), after CheckProgress(): from the
  // master (`status` OK), or what answers at its address when it does not (`status` not OK).
  // kStoreOpen: group rank 0, after a restart in place: no worker of the last round runs
  // anywhere any more; the workers' store may serve round `store_round`.
  // kResumed: after a resume join, this node has its place back in round `store_round`.
  // kReach: the answer to CheckReach: `status` OK when the store's host answered.
  enum class Kind {
    kAssigned,
    kStop,
    kEnd,
    kLost,
    kRefused,
    kHangReport,
    kExcluded,
    kProgress,
    kStoreOpen,
    kResumed,
    kReach
  };
  Kind kind = Kind::kAssigned;
  Assignment assignment;                               // kAssigned
  StopReason stop_reason = StopReason::kWorkerFailed;  // kStop
  RunOutcome outcome = RunOutcome::kSucceeded;         // kEnd
  std::string detail;           // kStop, kEnd: what happened; kHangReport: the whole report
  bool collect_stacks = false;  // kStop, kEnd: see Outbound
  // kStop: the next round, begun already (a restart in place): run it once the workers
  // have stopped, without a join.
  std::optional<Assignment> next;
  int64_t store_round = 0;                  // kStoreOpen, kResumed
  int64_t hang_round = 0;                   // kHangReport
  std::string hang_summary;                 // kHangReport: for the console
  std::vector<ReportedFailure> root_cause;  // kEnd, failed: the earliest failure anywhere
  std::vector<std::string> excluded;        // kEnd: the nodes the run kept out, a line each
  // kExcluded: how long (InfiniteDuration: for the rest of the job); `detail` says why.
  absl::Duration cooldown = absl::ZeroDuration();
  absl::Status status;  // kLost, kRefused: why; kReach: whether it answered, and if not why
};

class RendezvousConnection {
 public:
  virtual ~RendezvousConnection() = default;

  /// Readable while events are pending; TakeEvents() drains it.
  virtual int event_fd() const = 0;
  virtual std::vector<RendezvousEvent> TakeEvents() = 0;

  /// Asks for the next round (first join, and after every stop order).
  virtual void Join(const NodeInfo& node) = 0;
  virtual void ReportFailure(int64_t round, std::vector<ReportedFailure> failures) = 0;
  virtual void ReportSuccess(int64_t round) = 0;
  /// After a restart in place: every worker this node ran in `round` has exited.
  virtual void ReportStopped(int64_t round) = 0;
  virtual void Heartbeat() = 0;
  /// This node's workers' stacks after a hang stop (see stack_report.h); the rendezvous
  /// answers with kHangReport events. A one-node rendezvous has nothing to merge: no-op.
  virtual void ReportStacks(int64_t round, int world_size, const std::string& cause,
                            const std::vector<RankStack>& stacks) = 0;
  /// This node leaves the run for good (`reason`: why it is unhealthy); waits a moment for
  /// the message to go out, as the agent exits next.
  virtual void Leave(const std::string& reason) = 0;
  /// Opens a new session after kLost (the caller joins again once it is open).
  virtual void Reconnect() = 0;
  /// While this node waits for a round: find out how it goes, answered by a kProgress
  /// event. A one-node rendezvous never keeps a node waiting: no-op.
  virtual void CheckProgress() {}
  /// Where the restart into `split.round` went on this node, for the run's round table. A
  /// one-node rendezvous has no round table to show it: no-op.
  virtual void ReportRestart(const RestartSplit& /*split*/) {}
  /// After a resume was answered: how long this node was without a master in `round`, for
  /// the run's round table. A one-node rendezvous never loses its master: no-op.
  virtual void ReportOutage(int64_t /*round*/, absl::Duration /*lost*/) {}
  /// While the master is lost and this node's workers run: whether the host of `store`
  /// ("host:port") answers from here (a TCP connection, bounded: a refusal is an answer),
  /// answered by a kReach event. A one-node rendezvous never loses its master: no-op.
  virtual void CheckReach(const std::string& /*store*/) {}

  /// Where workers reach the Store service (DDPRUN_STORE_ADDR); empty when there is none.
  virtual std::string store_addr() const = 0;
  /// How often Heartbeat() must be called (InfiniteDuration: never).
  virtual absl::Duration heartbeat_interval() const = 0;
};

/// A thread-safe queue of events with an eventfd that is readable while it is not empty.
class EventQueue {
 public:
  EventQueue();
  ~EventQueue();
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  int fd() const { return fd_; }
  void Push(RendezvousEvent event);
  /// Makes the fd readable without an event: the reader has something of its own to look
  /// at (ElectedRendezvous: the run's leader moved).
  void Wake();
  std::vector<RendezvousEvent> Take();

 private:
  int fd_;
  struct State;
  State* state_;
};

/// kRefused for a status that trying again will not change (a refusal), else kLost.
RendezvousEvent::Kind LossOrRefusal(const absl::Status& status);

/// The events for one session out of a state machine's outbound messages.
std::vector<RendezvousEvent> EventsFor(SessionId session, std::vector<Outbound> outbound);

/// The rendezvous of a one-node job: the same rules as the master's (RoundStateMachine with
/// min = max = 1), in-process, without network or heartbeats.
class LocalRendezvous : public RendezvousConnection {
 public:
  /// The job's settings; those about several nodes do not apply to one.
  explicit LocalRendezvous(const RendezvousSettings& settings);
  explicit LocalRendezvous(int max_restarts);

  int event_fd() const override { return events_.fd(); }
  std::vector<RendezvousEvent> TakeEvents() override { return events_.Take(); }
  void Join(const NodeInfo& node) override;
  void ReportFailure(int64_t round, std::vector<ReportedFailure> failures) override;
  void ReportSuccess(int64_t round) override;
  void ReportStopped(int64_t round) override;
  void Heartbeat() override {}
  void ReportStacks(int64_t, int, const std::string&, const std::vector<RankStack>&) override {}
  void Leave(const std::string&) override {}
  void Reconnect() override {}
  std::string store_addr() const override { return ""; }
  absl::Duration heartbeat_interval() const override { return absl::InfiniteDuration(); }

 private:
  void Publish();

  static constexpr SessionId kSelf = 1;
  RoundStateMachine rounds_;
  EventQueue events_;
};

}  // namespace ddprun
