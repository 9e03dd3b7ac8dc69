#pragma once
// MasterState: everything the master knows, behind one mutex: each run's RoundStateMachine,
// its KvStore and its sessions, and the ticker thread that applies their deadlines. The
// services (session_service.h, store_service.h) call into it from gRPC's threads.

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/service_type.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "ddprun/v1/admin.pb.h"
#include "ddprun/v1/rendezvous.pb.h"
#include "master/master_listener.h"
#include "master/master_options.h"
#include "master/session.h"
#include "observability/master_metrics_sink.h"
#include "rendezvous/hang_reports.h"
#include "rendezvous/round_state_machine.h"
#include "store/kv_store.h"

namespace ddprun {

/// Everything the master knows; one mutex guards it all.
class MasterState {
 public:
  explicit MasterState(MasterOptions options)
      : options_(std::move(options)),
        session_end_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
        metrics_(options_.metrics != nullptr ? *options_.metrics : NoMasterMetrics()) {}
  ~MasterState() { ::close(session_end_fd_); }

  const MasterOptions& options() const { return options_; }
  int session_end_fd() const { return session_end_fd_; }
  int PendingStoreReads() {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const auto& [id, run] : runs_) n += run.store.Waiting();
    return n;
  }
  /// The Store bytes the master accounts for, and the sum over its runs' stores now (equal
  /// unless the accounting is wrong: checked by fuzz_store_service).
  std::pair<int64_t, int64_t> StoreBytes() {
    absl::MutexLock lock(&mu_);
    int64_t sum = 0;
    for (const auto& [id, run] : runs_) sum += run.store.bytes();
    return {store_bytes_, sum};
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
  MasterMetricsSink& metrics() { return metrics_; }

  // --- Sessions (called from gRPC threads) ---
  SessionId NewSessionId() { return next_session_.fetch_add(1); }
  /// A new stream: it is closed unless it joins within limits.join_deadline. Refused while
  /// its connection has limits.max_unjoined_streams_per_connection others that have not.
  absl::Status OnSessionOpened(Session* session);
  absl::Status OnAgentMessage(Session* session, const v1::AgentMessage& message);
  void OnSessionClosed(Session* session);

  // --- Store (called from gRPC threads) ---
  /// A blocking read parked in a run's store, for CancelStoreWait. The generation tells
  /// stores apart: a store is replaced at each round and when its run is forgotten, and
  /// waiter ids start again in each.
  struct ParkedRead {
    uint64_t generation = 0;
    KvStore::WaiterId waiter = 0;  // 0: it completed at once (or the store is closed)
    std::string peer;              // the client connection it counts against
  };
  /// `peer`: the client's connection (gRPC's peer string), for the cap per connection.
  ParkedRead StoreWait(absl::string_view token, const std::string& peer, const std::string& run_id,
                       std::vector<std::string> keys, absl::Time deadline, KvStore::Done done);
  /// The client gave the read up: drops its waiter. False when it is not parked any more
  /// (its `done` has run or is about to); `done` is never called after true.
  bool CancelStoreWait(const std::string& run_id, const ParkedRead& read);
  /// Runs `fn` on the run's store once the call may touch it (token, run id, a run this
  /// master serves); else returns why not. `fn` returns absl::Status or absl::StatusOr.
  template <typename Fn>
  auto WithStore(absl::string_view token, const std::string& run_id, Fn fn)
      -> decltype(fn(std::declval<KvStore&>())) {
    absl::ReleasableMutexLock lock(&mu_);
    absl::StatusOr<Run*> run = StoreRun(token, run_id);
    if (!run.ok()) {
      ReleaseAndRunPending(lock);
      return run.status();
    }
    const int64_t before = BeginStoreCall(**run);
    auto result = fn((*run)->store);
    store_bytes_ += (*run)->store.bytes() - before;
    TakeStoreCompletions(**run);
    ReleaseAndRunPending(lock);
    return result;
  }

  // Ends every blocking Store read now, and any that comes later: gRPC's shutdown waits for
  // open calls, and a read may wait for minutes.
  void AbortStoreReads() {
    absl::ReleasableMutexLock lock(&mu_);
    store_closed_ = true;
    for (auto& [id, run] : runs_) {
      run.store.AbortAll(absl::UnavailableError("the store is shutting down"));
      TakeStoreCompletions(run);
    }
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

  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::vector<std::unique_ptr<grpc::Service>> services;
  // gRPC's acceptor, fed by `listener` or by whoever shares the port (adopt_connections),
  // and whether the server is shutting down (gRPC would leave an fd it is handed then open).
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor;
  std::unique_ptr<MasterListener> listener;  // unless adopt_connections
  /// Serves connection `fd`, accepted on `listen_fd`; takes `fd`.
  void Adopt(int listen_fd, int fd) {
    absl::MutexLock lock(&adopt_mu);
    if (acceptor == nullptr || adopt_closed) {
      ::close(fd);
      return;
    }
    grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters connection;
    connection.listener_fd = listen_fd;
    connection.fd = fd;
    acceptor->HandleNewConnection(&connection);
  }
  absl::Mutex adopt_mu;
  bool adopt_closed ABSL_GUARDED_BY(adopt_mu) = false;

 private:
  static uint64_t NextStoreGeneration() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1);
  }
  struct Run {
    std::string id;
    std::optional<RoundStateMachine> rounds;
    KvStore store;
    uint64_t store_generation = NextStoreGeneration();  // see ParkedRead
    int64_t store_round = -1;                           // the round whose keys the store holds
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
  };
  // Answers a waiting node's Heartbeat.want_gathering.
  void SendGathering(Run& run, Session& session, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Feeds the rounds that began or ended since the last call to the metrics.
  void ObserveRounds(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The status of the runs `run_id` names (every run when empty).
  v1::StatusReply StatusLocked(const std::string& run_id, bool lists)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Erases a run (it ended, or was forgotten), and its metrics.
  std::map<std::string, Run>::iterator EraseRun(std::map<std::string, Run>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The run a Store call may touch, or why not (see WithStore).
  absl::StatusOr<Run*> StoreRun(absl::string_view token, const std::string& run_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the run store's limits for one call from what the master holds; its bytes before.
  int64_t BeginStoreCall(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Empties the run's store (a new round, or the run forgotten), failing its waiters.
  void DropStore(Run& run, const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One parked read of `peer` is over.
  void ReleaseWaiter(const std::string& peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets runs nobody holds a session in for longer than limits.idle_run_ttl, and closes
  // sessions that did not join in time; when to look again.
  absl::Time ForgetIdle(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A refused join or session, at info level, at most a few per second.
  void LogRefusal(const Session& session, const absl::Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Status Join(Session* session, const v1::Join& join) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Dispatch(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds a node's stacks to the round's hang report (HangReports), and sends it when complete.
  void MergeHangReport(Run& run, const Session& from, const v1::StackReport& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends a merged hang report to every node of the run, and says it in the master's log.
  void SendHangReport(Run& run, const HangReport& report) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TakeStoreCompletions(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases `lock` and runs the completions queued while it was held (Store replies,
  // which must not run under the mutex). One lock per message.
  void ReleaseAndRunPending(absl::ReleasableMutexLock& lock) ABSL_UNLOCK_FUNCTION(mu_);
  void SessionEnded(const std::string& run_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
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
  int64_t store_bytes_ ABSL_GUARDED_BY(mu_) = 0;                     // every run's store together
  std::map<std::string, int> waiters_by_peer_ ABSL_GUARDED_BY(mu_);  // parked reads per client
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
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // While the ticker sleeps: when it will wake by itself. InfinitePast while it is awake.
  absl::Time ticker_wakes_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool store_closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::function<void()>> pending_ ABSL_GUARDED_BY(mu_);
  std::thread ticker_;
};

}  // namespace ddprun
