#pragma once
// MasterState: everything the master knows, behind one mutex: each run's RoundStateMachine,
// its sessions and its Store (RunStores), and the ticker thread that applies their deadlines.
// The services (session_service.h, rpc/store_service.h) call into it from gRPC's threads.

#include <grpcpp/grpcpp.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/tcp_probe.h"
#include "ddprun/v1/admin.pb.h"
#include "ddprun/v1/rendezvous.pb.h"
#include "master/master_options.h"
#include "master/session.h"
#include "observability/master_metrics_sink.h"
#include "rendezvous/hang_reports.h"
#include "rendezvous/round_state_machine.h"
#include "rpc/store_service.h"
#include "store/run_stores.h"

namespace ddprun {

/// Everything the master knows; one mutex guards it all.
class MasterState : public StoreHost {
 public:
  explicit MasterState(MasterOptions options)
      : options_(std::move(options)),
        session_end_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
        metrics_(options_.metrics != nullptr ? *options_.metrics : NoMasterMetrics()),
        stores_(options_.limits) {}
  ~MasterState() override { ::close(session_end_fd_); }

  const MasterOptions& options() const { return options_; }
  int session_end_fd() const { return session_end_fd_; }
  int PendingStoreReads() {
    absl::MutexLock lock(&mu_);
    return stores_.Waiting();
  }
  int SessionCount(const std::string& run_id) {
    absl::MutexLock lock(&mu_);
    auto it = runs_.find(run_id);
    return it == runs_.end() ? 0 : static_cast<int>(it->second.sessions.size());
  }
  /// The run has not ended, or agents still hold sessions in it: nodes may still need this
  /// master (see HostedMaster::RunGoesOn).
  bool RunGoesOn(const std::string& run_id) {
    absl::MutexLock lock(&mu_);
    auto it = runs_.find(run_id);
    if (it == runs_.end()) return false;
    return !it->second.sessions.empty() ||
           (it->second.rounds && it->second.rounds->phase() != RoundStateMachine::Phase::kEnded);
  }

  // --- Admin (master_state_admin.cc; called from gRPC and HTTP threads) ---
  /// Every run's status, or `run_id`'s (NotFound when the master does not hold it); without
  /// `lists`, only its counts (RunStatusOf).
  absl::StatusOr<v1::StatusReply> Status(const std::string& run_id, bool lists = true);
  /// Status, for a caller that shows `token`: refused unless it is the master's.
  absl::StatusOr<v1::StatusReply> Status(absl::string_view token, const std::string& run_id);
  /// Ends `run_id` on an operator's request (`ddprun stop`, from `peer`): every agent stops
  /// its workers and exits (0; 143 without a token). What it did, in words.
  absl::StatusOr<std::string> StopRun(absl::string_view token, const std::string& run_id,
                                      const std::string& reason, const std::string& peer);
  MasterMetricsSink& metrics() override { return metrics_; }

  // --- Sessions (called from gRPC threads) ---
  SessionId NewSessionId() { return next_session_.fetch_add(1); }
  /// A new stream: it is closed unless it joins within limits.join_deadline. Refused while
  /// its connection has limits.max_unjoined_streams_per_connection others that have not.
  absl::Status OnSessionOpened(Session* session);
  absl::Status OnAgentMessage(Session* session, const v1::AgentMessage& message);
  void OnSessionClosed(Session* session);

  // --- Store (StoreHost; called from gRPC threads): the Store of the runs agents joined ---
  absl::Status WithStore(absl::string_view token, const std::string& run_id,
                         absl::FunctionRef<absl::Status(KvStore&)> fn) override;
  ParkedRead StoreWait(absl::string_view token, const std::string& peer, const std::string& run_id,
                       std::vector<std::string> keys, absl::Time deadline,
                       KvStore::Done done) override;
  bool CancelStoreWait(const std::string& run_id, const ParkedRead& read) override;
  absl::Duration store_timeout() const override { return options_.store_timeout; }
  // Ends every blocking Store read now, and any that comes later: gRPC's shutdown waits for
  // open calls, and a read may wait for minutes.
  void AbortStoreReads() {
    absl::ReleasableMutexLock lock(&mu_);
    stores_.AbortAll(absl::UnavailableError("the store is shutting down"));
    ReleaseAndRunPending(lock);
  }

  void StartTicker() {
    ticker_ = std::thread([this] { TickerLoop(); });
  }
  void StopTicker() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      WakeTickerBefore(absl::InfiniteFuture());
    }
    if (ticker_.joinable()) ticker_.join();
  }

 private:
  struct Run {
    std::string id;
    absl::Time created_wall;  // when the first join made it, on the wall clock: for people
    std::optional<RoundStateMachine> rounds;
    int64_t store_round = -1;  // the round whose keys its store (in stores_) holds
    std::map<SessionId, Session*> sessions;
    HangReports hang_reports;  // the stacks nodes sent after a hang stop
    // Since when no agent holds a session in it (or since it was made): forgotten after
    // limits.idle_run_ttl.
    absl::Time idle_since;
    // The last round whose start, and whose end, the metrics have seen (ObserveRounds).
    int64_t observed_began = -1, observed_ended = -1;
    // GatheringProgress is O(nodes) and every waiting node asks for it: one text a second.
    std::string gathering;
    absl::Time gathering_at = absl::InfinitePast();
    // The memory_version() MasterOptions::remember was last given.
    int64_t remembered_version = -1;
  };
  // Why a join for `run_id` is refused by a master that serves only another run: which job
  // it does serve, since when, and what to do.
  std::string AnotherJobsMaster(const std::string& run_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers a waiting node's Heartbeat.want_gathering.
  void SendGathering(Run& run, Session& session, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Feeds the rounds that began or ended since the last call to the metrics.
  void ObserveRounds(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The status of the runs `run_id` names (every run when empty).
  v1::StatusReply StatusLocked(const std::string& run_id, bool lists)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Erases a run (it ended, or was forgotten), its Store (failing its reads with `why`) and
  // its metrics.
  std::map<std::string, Run>::iterator EraseRun(std::map<std::string, Run>::iterator it,
                                                const absl::Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // OK when a Store call may touch the run: the token, the run id, and a run an agent joined.
  absl::Status StoreAccess(absl::string_view token, const std::string& run_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets runs nobody holds a session in for longer than limits.idle_run_ttl, and closes
  // sessions that did not join in time; when to look again.
  absl::Time ForgetIdle(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A refused join or session, at info level, at most a few per second.
  void LogRefusal(const Session& session, const absl::Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Status Join(Session* session, const v1::Join& join) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A resume that would have a run take its round up holds places: bounded over every run
  // (limits.max_places_held).
  absl::Status CheckPlacesHeld(const RoundStateMachine& rounds, const NodeInfo& node) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Dispatch(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds a node's stacks to the round's hang report (HangReports), and sends it when complete.
  void MergeHangReport(Run& run, const Session& from, const v1::StackReport& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends a merged hang report to every node of the run, and says it in the master's log.
  void SendHangReport(Run& run, const HangReport& report) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases `lock` and runs the Store replies queued while it was held, which must not run
  // under the mutex. One lock per message.
  void ReleaseAndRunPending(absl::ReleasableMutexLock& lock) ABSL_UNLOCK_FUNCTION(mu_);
  void SessionEnded(const std::string& run_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A member's stream broke and its place is held: is its agent still there? A connection to
  // its store, answered on the ticker (ProbeAnswers): refused, the agent is gone. The first
  // look comes kFirstProbeAfter the break (ProbeSoon), then one every kReprobeEvery while the
  // place is held. What ProbeAnswers returns is when the ticker must look next.
  void ProbeSoon(const Run& run, SessionId session, absl::Duration after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ProbeAwayAgent(const Run& run, SessionId session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time ProbeAnswers(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static constexpr absl::Duration kFirstProbeAfter = absl::Milliseconds(20);
  static constexpr absl::Duration kReprobeEvery = absl::Milliseconds(250);
  void TickerLoop();
  // Wakes the ticker when `deadline` comes before the time it sleeps until. Only then: a
  // wake-up per message would cost a thread switch per heartbeat at scale.
  void WakeTickerBefore(absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (stopping_ || deadline < ticker_wakes_at_) wake_.Signal();
  }

  const MasterOptions options_;
  const int session_end_fd_;
  MasterMetricsSink& metrics_;  // options_.metrics, or NoMasterMetrics()
  absl::Mutex mu_;
  absl::CondVar wake_;
  std::map<std::string, Run> runs_ ABSL_GUARDED_BY(mu_);
  RunStores stores_ ABSL_GUARDED_BY(mu_);  // each run's Store, by run id
  // Streams that have not joined yet, and when they must have; how many on each connection.
  using Unjoined = std::map<SessionId, std::pair<absl::Time, Session*>>;
  Unjoined unjoined_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> unjoined_by_peer_ ABSL_GUARDED_BY(mu_);
  Unjoined::iterator ForgetUnjoined(Unjoined::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetUnjoined(SessionId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // LogRefusal's rate limit: refusals logged in the current second, and those not logged.
  absl::Time refusal_window_ ABSL_GUARDED_BY(mu_);
  int refusals_logged_ ABSL_GUARDED_BY(mu_) = 0;
  int refusals_unlogged_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<SessionId> next_session_{1};
  TcpProbes away_probes_ ABSL_GUARDED_BY(mu_);                                // by session id
  std::map<SessionId, std::string> probed_runs_ ABSL_GUARDED_BY(mu_);         // their run ids
  std::set<std::pair<absl::Time, SessionId>> reprobes_ ABSL_GUARDED_BY(mu_);  // when to look again
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // While the ticker sleeps: when it will wake by itself. InfinitePast while it is awake.
  absl::Time ticker_wakes_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::thread ticker_;
};

}  // namespace ddprun
