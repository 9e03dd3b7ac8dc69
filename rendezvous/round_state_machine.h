#pragma once
// RoundStateMachine: the rendezvous rules of one run, as the master applies them. Pure: no
// sockets, no threads, no clock of its own. The gRPC layer feeds it events with the master's
// monotonic time and sends the messages it emits; tests drive it with a fake clock.
//
//   GATHERING --(min nodes joined)--> last call --(deadline, max nodes, or every member of
//       ^                                           the previous round back)--> RUNNING
//       |                                                                          |
//       +--(a worker failed and the budget allows; a member died; a node waits)----+
//   RUNNING --(a worker failed; every member connected, healthy, able to; none waits)-->
//       RUNNING, the next round sent with the stop orders (a restart in place)
//   RUNNING --(one node's workers all succeeded)--> FINISHING --(all done)--> ENDED
//   any --(budget spent, join_timeout, fewer than min nodes for join_timeout)--> ENDED
//
// Every agent holds one session; a session joins, heartbeats, reports, and is told what to
// do. Sessions are identified by the caller (the gRPC layer's stream id).

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/natural_less.h"
#include "rendezvous/assignment.h"
#include "rendezvous/node_health.h"
#include "rendezvous/node_tracker.h"
#include "rendezvous/protocol_words.h"
#include "rendezvous/rendezvous_settings.h"
#include "rendezvous/restart_split.h"
#include "rendezvous/stack_report.h"

namespace ddprun {

/// One round of a run, as the status shows it (docs/observability.md).
struct RoundRecord {
  int64_t round = 0;
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT in it
  int nodes = 0;
  int world_size = 0;
  absl::Time gathering_began;                 // when the rendezvous that made it began
  absl::Time began;                           // when it closed and workers were started
  absl::Time ended = absl::InfiniteFuture();  // InfiniteFuture while it runs
  std::string ended_by;                       // why it ended, once it has
  std::optional<ReportedFailure> root_cause;  // the earliest failure, when workers failed
  // The restart into this round, each part the longest any node said (RestartExplained);
  // none for the first round, or before a node has said.
  std::optional<RestartSplit> restart;
  // A restarted master took it up from its nodes' resumes (it did not begin it).
  bool taken_up = false;
  // The longest time a member was without a master while it ran (OutageExplained).
  std::optional<absl::Duration> master_outage;
};

/// A node of the run, as the status shows it.
struct NodeView {
  enum class State { kRunning, kFinished, kWaiting, kIdle };
  SessionId session = 0;
  const NodeInfo* info = nullptr;
  State state = State::kIdle;
  int group_rank = -1;  // in the current round; -1 when not a member
  int base_rank = 0;
  absl::Time last_seen;
};

/// A message for one session, to be sent by the I/O layer in the order emitted.
struct Outbound {
  // kEvict: the master dropped this session (it went silent); its stream should be closed
  // with `detail`, so that the agent stops its workers and joins again.
  // kExclude: the node is kept out (node_health.h) for `cooldown`: it stops its workers and
  // joins again after it (InfiniteDuration: it leaves the job). `detail` says why.
  // kOpenStore: to group rank 0 after a restart in place, once every member's workers of the
  // last round have exited: its TCPStore may serve round `store_round`.
  // kResumed: the answer to a join with `resume`: the node has its place back in round
  // `store_round`; its workers go on.
  enum class Kind { kAssign, kStop, kEnd, kEvict, kExclude, kOpenStore, kResumed };
  SessionId session = 0;
  Kind kind = Kind::kAssign;
  Assignment assignment;                               // kAssign
  StopReason stop_reason = StopReason::kWorkerFailed;  // kStop
  RunOutcome outcome = RunOutcome::kSucceeded;         // kEnd
  std::string detail;  // kStop/kEnd: what happened, for the agent's log and summary
  // kStop: the next round, begun already (a restart in place): once its workers have
  // stopped, the node runs it without a join.
  std::optional<Assignment> next;
  int64_t store_round = 0;  // kOpenStore, kResumed
  // kStop, kEnd: a rank hung; record where every worker is before stopping it.
  bool collect_stacks = false;
  std::vector<ReportedFailure> root_cause;         // kEnd with kFailed: the earliest failure
  absl::Duration cooldown = absl::ZeroDuration();  // kExclude
  std::vector<std::string> excluded;  // kEnd: every node the run kept out, and why (a line each)
};

class RoundStateMachine {
 public:
  enum class Phase { kGathering, kRunning, kFinishing, kEnded };

  /// `run_incarnation`: random, made by the master for a run it begins (Assignment's); a
  /// master that takes the run over takes the run's (Recall, a taken-up round's).
  RoundStateMachine(RendezvousSettings settings, absl::Time now, std::string run_incarnation = "");

  /// A session asks to be in the next round. A session of the same incarnation (the same
  /// agent process) is dropped: the agent left it. Errors: FailedPrecondition once the run
  /// has ended. A join with `node.resume` is a resume (below).
  absl::Status Join(SessionId session, const NodeInfo& node, absl::Time now);
  /// Proof of life; unknown sessions are ignored.
  void Heartbeat(SessionId session, absl::Time now);
  /// The session's stream broke. A member of a running round is away: its place is held for
  /// ReconnectGrace(), for its agent to come back on a new session (Resume), and it is lost
  /// if it does not. Any other node is gone at once.
  void Disconnect(SessionId session, absl::Time now);
  /// How long the place of a member whose stream broke is held: keep_alive_interval, at
  /// least 2 s (a reconnect needs up to gRPC's 1 s back-off) and at most the keep-alive
  /// window. A failure report whose every worker died because a peer went away ends the
  /// wait at once: its peers saw the away member's workers die.
  absl::Duration ReconnectGrace() const;
  /// The node's agent exits (its workers have exited): it is gone at once.
  void Bye(SessionId session, absl::Time now);
  /// Where the agent of an away member serves its workers' store, an IP address and port:
  /// nothing listening there any more means its agent is gone. Of the placeholders a
  /// restarted master holds, only group rank 0's store is known (every resume names it).
  std::optional<std::pair<std::string, int>> AwayAgentStore(SessionId session) const;
  /// Nothing listens any more where the away member's agent served its store: the agent is
  /// gone (killed), not cut off. It is lost at once.
  void AgentGone(SessionId session, absl::Time now);
  /// Workers of `round` on this session's node failed (`failures` not empty).
  void ReportFailure(SessionId session, int64_t round, std::vector<ReportedFailure> failures,
                     absl::Time now);
  /// Stacks a node sent for `round`: kept only when `round` is the last round, it ended for a
  /// hung rank, and the session was one of its members; then only the node's own ranks, under
  /// its own name (a node speaks for its ranks only, as in ReportFailure). Returns the round's
  /// world size, which is the report's, never one a node claims; nullopt (and no stacks) else.
  std::optional<int> ClaimStacks(SessionId session, int64_t round,
                                 std::vector<RankStack>& stacks) const;
  /// The node leaves for good as unhealthy (`reason` from its agent): it is gone at once, and
  /// kept out for the cooldown should it come back.
  void Leave(SessionId session, const std::string& reason, absl::Time now);
  /// Every worker of `round` on this session's node exited 0.
  void ReportSuccess(SessionId session, int64_t round, absl::Time now);
  /// After a restart in place: every worker this session's node ran in `round` has exited.
  /// Once every member has said so, group rank 0 is sent kOpenStore.
  void ReportStopped(SessionId session, int64_t round);
  /// A member of the running round says where the restart into it went on its node: kept
  /// in the round's record, each part the longest any member said. Nothing from a session
  /// that is no member, or about another round.
  void RestartExplained(SessionId session, const RestartSplit& split);
  /// A member of the running round was without a master for `lost` while in it: kept in the
  /// round's record, the longest any member said. Nothing from a session that is no member,
  /// or about another round.
  void OutageExplained(SessionId session, int64_t round, absl::Duration lost);
  /// An operator ends the run (`ddprun stop`): every node stops its workers and exits (0, or 143
  /// in a job without a token: the agents decide).
  /// Nothing once it has ended.
  void Stop(const std::string& detail, absl::Time now);
  /// Applies every deadline that has passed by `now`.
  void Tick(absl::Time now);

  /// Messages emitted since the last call, in order.
  std::vector<Outbound> TakeOutbound();
  /// When Tick must next be called (InfiniteFuture when nothing is pending).
  absl::Time NextDeadline() const;

  Phase phase() const { return phase_; }
  const RendezvousSettings& settings() const { return settings_; }
  int64_t round() const { return round_; }
  /// Places a restarted master would hold for the round it takes up: the most any round the
  /// resumes it heard name has (HoldForTakeUp), and those it holds (Rebuild).
  int placeholders() const;
  /// This resume would have the run take its round up (a restarted master), holding up to
  /// `node.resume->group_world_size` places.
  bool WouldTakeUp(const NodeInfo& node) const;
  int restarts_spent() const { return restarts_spent_; }
  const std::string& run_incarnation() const { return run_incarnation_; }
  const NodeHealth& health() const { return health_; }
  /// What the next master of this run must not forget, at `now` (RunMemory).
  RunMemory Memory(absl::Time now) const;
  /// Takes over what the run's last master remembered (before any join).
  void Recall(const RunMemory& memory, absl::Time now);
  /// Grows whenever Memory() would say something new.
  int64_t memory_version() const {
    return health_.changes() + restarts_spent_ + incarnation_changes_;
  }
  /// Sessions in the current round, in group-rank order (none once the run has ended).
  const std::vector<SessionId>& members() const { return members_; }
  /// Sessions that joined and wait for the next round to close.
  std::vector<SessionId> waiting() const;
  /// This session joined and waits for the next round to close.
  bool IsWaiting(SessionId session) const;
  /// Every node that holds a session, members first in group-rank order.
  std::vector<NodeView> Nodes() const;
  /// Why the nodes that joined wait for a round, in words; empty when none waits.
  std::string WhyWaiting(absl::Time now) const;
  /// For a node that waits: WhyWaiting, and while the round gathers, who came, the
  /// --node-rank values still missing (static), who was lost from the last round and how
  /// long is left before join_timeout ends the run. O(nodes): the master caches it.
  std::string GatheringProgress(absl::Time now) const;
  /// The last kHistoryRounds rounds, oldest first; the last one may still run.
  static constexpr size_t kHistoryRounds = 100;
  const std::deque<RoundRecord>& history() const { return history_; }
  /// How the run ended, once it has (phase() == kEnded), and why.
  RunOutcome outcome() const { return outcome_; }
  const std::string& end_detail() const { return end_detail_; }
  /// Nodes dropped for sending no heartbeat in time, so far.
  int keep_alive_misses() const { return keep_alive_misses_; }
  /// The failed workers members reported for their own ranks, so far, by cause (exit code,
  /// signal, hang, timer: DescribeCause) and code; codes outside -64..255 count as
  /// kOtherExitCode.
  static constexpr int kOtherExitCode = 256;
  const std::map<std::pair<std::string, int>, int>& failure_counts() const {
    return failure_counts_;
  }

 private:
  // The flags of a node are changed only through the Set* helpers below, which keep the
  // counters right: with 10,000 agents, counting or searching on every message would make
  // a round cost O(N^2).
  using Node = TrackedNode;

  void BeginGathering(absl::Time now);
  // A session of the same agent other than `session` is dropped: the agent gave it up.
  void DropOldSession(SessionId session, const NodeInfo& node, absl::Time now);
  // A join with `resume`: the agent lost its master while its workers ran round
  // node.resume->round, and they still do. It takes its place back when it is (still) a
  // member of that round; a master that does not know the round (it restarted) rebuilds it
  // from this node (Rebuild); otherwise the round is over here, and it is ordered to stop.
  absl::Status Resume(SessionId session, const NodeInfo& node, absl::Time now);
  // A resume to a master that does not know its round (it restarted): the session waits,
  // with every resume of the same round digest, until ReconnectGrace() after the first
  // resume; then the master takes up the round most of them prove (DecideTakeUp). The first
  // resume decides nothing: a token holder's round of its own making is one more round.
  absl::Status HoldForTakeUp(SessionId session, const NodeInfo& node, absl::Time now);
  // The take-up's time is up: the round that most resumes prove is taken up when every one
  // of its places came back (each resumed agent takes its place; the round goes on), and
  // ends otherwise, as a round that lost a member does; the resumes of any other round are
  // told to stop.
  void DecideTakeUp(absl::Time now);
  // DecideTakeUp's parts: the resumes of hosts kept out meanwhile are told so and dropped;
  // the round the most resumes prove (none: every one was dropped); the resumes of the other
  // rounds are told to stop; the chosen round, every place back, is taken up, and what its
  // nodes reported meanwhile is applied; or, a place not back, it ends, as a round that
  // lost a member does, its numbers (round, restarts spent) carried over.
  struct HeldRound;
  struct TakeUp;
  struct HeldResume;
  void KeepOutHeldHosts(TakeUp& take_up, absl::Time now);
  static const HeldRound* MostProved(const TakeUp& take_up);
  void StopOtherRounds(const TakeUp& take_up, const HeldRound& chosen, absl::Time now);
  void TakeUpWhole(const HeldRound& chosen, std::map<SessionId, HeldResume>& held_resumes,
                   absl::Time now);
  void LoseTakenUpRound(const HeldRound& held, absl::Time now);
  // The first round a master closes from joins, when it knows no round of the run (it
  // restarted, or took nothing up): rounds and TORCHELASTIC_RESTART_COUNT go on from where
  // the members' agents say the run was (`last_round`, `restarts_seen`), so that the
  // budget is not handed out afresh.
  void AdoptJoinClaims();
  // A resume held for a take-up is no longer (its session ended, or the take-up decided).
  void ForgetHeldResume(SessionId session);
  // A report from a session whose resume is held, about the round it resumes: kept, and
  // made once it has its place (its agent sends it once, right after the resume). Empty
  // `failures`: its workers succeeded. False: the session's resume is not held.
  bool HoldReport(SessionId session, int64_t round, const std::vector<ReportedFailure>& failures);
  // Round `resumed.round`, with group_world_size members, none of them in it yet: each
  // place is held by a placeholder, to be taken over (TakeOver) by its agent's session.
  void Rebuild(const Assignment& resumed, absl::Time now);
  // A round taken up (or not, for want of a place): its round and restarts spent carry
  // over, and it has a record, begun at `began`.
  RoundRecord& CarryOver(const Assignment& numbers, absl::Time began);
  // The agent of member `old` (a placeholder, an away member, or one whose old stream is
  // still open) is back on `session`: it takes the place, and an old stream is closed.
  void TakeOver(SessionId old, SessionId session, const NodeInfo& node, absl::Time now);
  // The round a resuming node runs is over here (`why`; by default, it ended while the node
  // was away): it stops its workers and joins again.
  absl::Status StopStale(SessionId session, const NodeInfo& node, absl::Time now,
                         const std::string& why = "");
  // This node's place in the running round, when it resumes that round: its own (the same
  // agent). 0: none.
  SessionId PlaceOf(const NodeInfo& node) const;
  void MarkAway(SessionId session, absl::Time until);
  // Removes every away member: the round ends (a membership change).
  void LoseAwayMembers(const std::string& why, absl::Time now);
  // A member of the round whose workers have not succeeded is away (O(away)).
  bool AnUnfinishedMemberIsAway() const;
  // A join after the run has ended: refused, unless an operator stopped it (then the agent
  // is told so, and exits as the others did).
  absl::Status JoinEndedRun(SessionId session);
  void MaybeCloseRound(absl::Time now);
  void CloseRound(absl::Time now);
  // Begins the next round with members_ in group-rank order: each is sent its assignment,
  // as the answer to its join, or with the stop order of the round that ends (`stop_detail`:
  // a restart in place).
  void BeginRound(const std::optional<std::string>& stop_detail, absl::Time now);
  // Sends a member its assignment: the answer to its join, or with the stop order of the
  // round that ends (`stop_detail`: a restart in place).
  void SendAssignment(SessionId session, Assignment assignment,
                      const std::optional<std::string>& stop_detail);
  // A worker failed and the round ends: the next round can be the same members in the same
  // order, told in one message each, when every member is connected (none away), healthy
  // and able to, no node waits to join and no rank hung. Otherwise every member rejoins
  // (EndRound).
  bool CanRestartInPlace(absl::Time now) const;
  void RestartInPlace(const std::string& detail, absl::Time now);
  // A join with a failed health check excludes its host: only when every other agent in the
  // run under that host came from the same address (two agents on one host are one node; a
  // stranger elsewhere must not exclude a healthy node).
  absl::Status CheckFailedCheckIsItsOwn(SessionId session, const NodeInfo& node) const;
  // What group rank 0's TCPStore serves: every member's addresses (Assignment).
  std::vector<std::string> StoreClients() const;
  // The running round's record ends: `why`, with this round's root cause if workers failed.
  void EndRecord(const std::string& why, absl::Time now);
  void EndRound(StopReason reason, const std::string& detail, absl::Time now);
  void EndRun(RunOutcome outcome, const std::string& detail, absl::Time now);
  void RemoveNode(SessionId session, const std::string& why, bool evict, absl::Time now);
  void ReleaseFinishedMembers();
  std::vector<SessionId> OrderForNextRound() const;
  bool AllPreviousMembersBack() const;
  bool IsMember(SessionId session) const;
  // Forgets `session`'s node, and a resume it held.
  void EraseNode(SessionId session);
  std::string DescribeMissing(absl::Time now) const;
  void SendExclusion(SessionId session, const NodeExclusion& exclusion, absl::Time now);
  // A host was just excluded: its other agents are kept out too (two agents on one host are
  // one node): those waiting for a round now, those in the running round when it ends,
  // which is now unless the caller ends it anyway. O(nodes), once per exclusion.
  void KeepOutHost(const std::string& host, bool round_ends_anyway, absl::Time now);
  absl::Duration DeadAfter() const;
  // The run is the one `run_incarnation` names (a recalled memory's, a taken-up round's).
  void AdoptRunIncarnation(const std::string& run_incarnation);

  RendezvousSettings settings_;
  NodeHealth health_;
  Phase phase_ = Phase::kGathering;
  int64_t round_ = -1;  // the last round closed; -1 before the first
  int restarts_spent_ = 0;
  std::string run_incarnation_;
  int incarnation_changes_ = 0;  // for memory_version
  bool collect_stacks_ = false;  // while ReportFailure ends the round or run for a hung rank
  int64_t stacks_round_ = -1;    // the last round that ended for a hung rank
  NodeTracker nodes_;
  std::vector<SessionId> members_;  // current round, in group-rank order
  // The round before, for the fast path and the order. May name sessions that have left
  // since; previous_alive_ counts those still here.
  std::vector<SessionId> previous_members_;
  // The resumes a restarted master heard, by the round digest they prove (HoldForTakeUp).
  struct HeldRound {
    Assignment numbers;               // the round's, as the first resume of it says
    std::map<int, SessionId> places;  // by group rank
    int64_t heard = 0;                // the order it was first heard in: the earlier wins a tie
  };
  struct TakeUp {  // no member initializers: clang cannot emplace it in take_up_ then
    absl::Time decide_at;
    std::map<std::string, HeldRound> rounds;  // by round digest
    int64_t heard;                            // rounds heard so far
  };
  std::optional<TakeUp> take_up_;
  struct HeldResume {
    std::string digest;
    int group_rank = 0;
    int64_t round = 0;
    // What its agent reported of the round meanwhile: none, success, or these failures.
    std::optional<std::vector<ReportedFailure>> report;
  };
  std::map<SessionId, HeldResume> held_resumes_;
  SessionId next_placeholder_ = SessionId{1} << 62;  // above any session id the master draws
  absl::Time gathering_since_;
  std::optional<absl::Time> last_call_deadline_;
  std::optional<absl::Time> finishing_deadline_;
  std::vector<ReportedFailure> failures_;        // every failure reported in this run
  std::string end_detail_;                       // why the run ended, once it has
  RunOutcome outcome_ = RunOutcome::kSucceeded;  // once it has
  std::deque<RoundRecord> history_;
  int keep_alive_misses_ = 0;
  std::map<std::pair<std::string, int>, int> failure_counts_;
  std::vector<std::string> departed_;  // hosts of members lost since the last round closed
  // After a restart in place: the members whose workers of round round_ - 1 may still run.
  // Group rank 0's store opens when none is left; a round that ends first forgets them.
  std::set<SessionId> still_stopping_;
  std::vector<Outbound> outbound_;
};

}  // namespace ddprun
