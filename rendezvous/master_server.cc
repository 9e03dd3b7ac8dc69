#include "rendezvous/master_server.h"

#include <grpcpp/grpcpp.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "ddprun/v1/rendezvous.grpc.pb.h"
#include "ddprun/v1/store.grpc.pb.h"
#include "rendezvous/kv_store.h"
#include "rendezvous/node_address.h"
#include "rendezvous/round_state_machine.h"
#include "rendezvous/wire.h"

namespace ddprun {

absl::Time MonotonicNow() {
  return absl::FromUnixNanos(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count());
}

void DisableMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

namespace {

namespace pb = ::ddprun::v1;

}  // namespace

class SessionReactor;

/// Everything the master knows; one mutex guards it all.
class MasterServer::Impl {
 public:
  explicit Impl(MasterOptions options)
      : options_(std::move(options)), session_end_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~Impl() { ::close(session_end_fd_); }

  const MasterOptions& options() const { return options_; }
  int session_end_fd() const { return session_end_fd_; }
  int PendingStoreReads() {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const auto& [id, run] : runs_) n += run.store.Waiting();
    return n;
  }
  int SessionCount(const std::string& run_id) {
    absl::MutexLock lock(&mu_);
    auto it = runs_.find(run_id);
    return it == runs_.end() ? 0 : static_cast<int>(it->second.sessions.size());
  }

  // --- Sessions (called from gRPC threads) ---
  SessionId NewSessionId() { return next_session_.fetch_add(1); }
  absl::Status OnAgentMessage(SessionReactor* reactor, const pb::AgentMessage& message);
  void OnSessionClosed(SessionReactor* reactor);

  // --- Store (called from gRPC threads) ---
  void StoreWait(const std::string& run_id, std::vector<std::string> keys, absl::Time deadline,
                 KvStore::Done done);
  template <typename Fn>
  auto WithStore(const std::string& run_id, Fn fn) {
    absl::ReleasableMutexLock lock(&mu_);
    auto result = fn(runs_[run_id].store);
    TakeStoreCompletions(runs_[run_id]);
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

  void StartTicker() { ticker_ = std::thread([this] { TickerLoop(); }); }
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
  // adopt_connections: gRPC's acceptor, and whether the server is shutting down (gRPC would
  // leave an fd it is handed then open).
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor;
  absl::Mutex adopt_mu;
  bool adopt_closed ABSL_GUARDED_BY(adopt_mu) = false;

 private:
  struct Run {
    std::optional<RoundStateMachine> rounds;
    KvStore store;
    int64_t store_round = -1;  // the round whose keys the store holds
    std::map<SessionId, SessionReactor*> sessions;
  };

  absl::Status Join(SessionReactor* reactor, const pb::Join& join) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Dispatch(Run& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
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
  absl::Mutex mu_;
  absl::CondVar wake_;
  std::map<std::string, Run> runs_ ABSL_GUARDED_BY(mu_);
  std::atomic<SessionId> next_session_{1};
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // While the ticker sleeps: when it will wake by itself. InfinitePast while it is awake.
  absl::Time ticker_wakes_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool store_closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::function<void()>> pending_ ABSL_GUARDED_BY(mu_);
  std::thread ticker_;
};

/// One agent's Session stream. Writes are queued: at most one is in flight.
class SessionReactor : public grpc::ServerBidiReactor<pb::AgentMessage, pb::MasterMessage> {
 public:
  SessionReactor(MasterServer::Impl* master, std::string peer)
      : master_(master), id_(master->NewSessionId()), peer_(std::move(peer)) {
    StartRead(&in_);
  }

  SessionId id() const { return id_; }
  /// Where the agent's connection comes from, as gRPC names it ("ipv4:10.0.0.2:41234").
  const std::string& peer() const { return peer_; }
  // The run this session joined; written and read only under the master's mutex.
  std::string run_id;
  bool joined = false;
  // The master dropped it (it went silent): what still arrives on it is refused, so that
  // its session id never enters the rules again.
  bool evicted = false;

  /// Ends the stream with `status` once the queued messages are written.
  void Close(const grpc::Status& status) {
    {
      absl::MutexLock lock(&write_mu_);
      if (finished_ || close_status_) return;
      if (writing_) {
        close_status_ = status;
        return;
      }
    }
    FinishOnce(status);
  }

  void Send(pb::MasterMessage message) {
    {
      absl::MutexLock lock(&write_mu_);
      if (finished_) return;
      queue_.push_back(std::move(message));
      if (writing_) return;
      writing_ = true;
    }
    StartWrite(&queue_.front());
  }

 private:
  void OnReadDone(bool ok) override {
    if (!ok) {  // the agent closed its side, or the connection broke
      master_->OnSessionClosed(this);
      FinishOnce(grpc::Status::OK);
      return;
    }
    if (absl::Status s = master_->OnAgentMessage(this, in_); !s.ok()) {
      master_->OnSessionClosed(this);
      FinishOnce(ToGrpcStatus(s));
      return;
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    bool more = false;
    std::optional<grpc::Status> close;
    {
      absl::MutexLock lock(&write_mu_);
      queue_.pop_front();
      more = ok && !queue_.empty() && !finished_;
      writing_ = more;
      if (!more) close.swap(close_status_);
    }
    if (more) StartWrite(&queue_.front());
    if (close) FinishOnce(*close);
  }

  void OnDone() override {
    master_->OnSessionClosed(this);
    delete this;
  }

  void FinishOnce(const grpc::Status& status) {
    {
      absl::MutexLock lock(&write_mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(status);
  }

  MasterServer::Impl* master_;
  const SessionId id_;
  const std::string peer_;
  pb::AgentMessage in_;
  absl::Mutex write_mu_;
  std::deque<pb::MasterMessage> queue_;  // front() is in flight while writing_
  bool writing_ = false;
  bool finished_ = false;
  std::optional<grpc::Status> close_status_;  // Close() waiting for the queue to drain
};

absl::Status MasterServer::Impl::OnAgentMessage(SessionReactor* reactor,
                                                const pb::AgentMessage& message) {
  absl::ReleasableMutexLock lock(&mu_);
  const absl::Time now = MonotonicNow();
  absl::Status status = CheckLimits(message);
  if (!status.ok()) {
    // refused below, before it touches any run
  } else if (reactor->evicted) {
    // ABORTED, as the eviction itself: the agent takes it for a lost session and rejoins.
    status = absl::AbortedError(
        "the master dropped this session; the agent joins again on a new one");
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
        run.rounds->ReportFailure(reactor->id(), report.round(), FromWire(report.failures()),
                                  now);
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

absl::Status MasterServer::Impl::Join(SessionReactor* reactor, const pb::Join& join) {
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

void MasterServer::Impl::OnSessionClosed(SessionReactor* reactor) {
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

void MasterServer::Impl::Dispatch(Run& run) {
  for (Outbound& out : run.rounds->TakeOutbound()) {
    if (out.kind == Outbound::Kind::kAssign && out.assignment.round != run.store_round) {
      // A new round: the store starts empty, and reads still waiting belong to the old one.
      run.store.AbortAll(absl::AbortedError(absl::StrCat(
          "the round ended while waiting for store keys (round ", out.assignment.round,
          " has begun)")));
      TakeStoreCompletions(run);
      run.store = KvStore();
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

void MasterServer::Impl::SessionEnded(const std::string& run_id) {
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

void MasterServer::Impl::TakeStoreCompletions(Run& run) {
  for (auto& completion : run.store.TakeCompletions()) pending_.push_back(std::move(completion));
}

void MasterServer::Impl::ReleaseAndRunPending(absl::ReleasableMutexLock& lock) {
  std::vector<std::function<void()>> pending;
  pending.swap(pending_);
  lock.Release();
  for (auto& completion : pending) completion();
}

void MasterServer::Impl::StoreWait(const std::string& run_id, std::vector<std::string> keys,
                                   absl::Time deadline, KvStore::Done done) {
  absl::ReleasableMutexLock lock(&mu_);
  if (store_closed_) {
    pending_.push_back([done = std::move(done)] {
      done(absl::UnavailableError("the store is shutting down"));
    });
  } else {
    Run& run = runs_[run_id];
    run.store.WaitFor(std::move(keys), deadline, std::move(done));
    TakeStoreCompletions(run);
    WakeTickerBefore(deadline);
  }
  ReleaseAndRunPending(lock);
}

void MasterServer::Impl::TickerLoop() {
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


namespace {

class RendezvousService : public pb::Rendezvous::CallbackService {
 public:
  explicit RendezvousService(MasterServer::Impl* master) : master_(master) {}
  grpc::ServerBidiReactor<pb::AgentMessage, pb::MasterMessage>* Session(
      grpc::CallbackServerContext* context) override {
    return new SessionReactor(master_, context->peer());
  }

 private:
  MasterServer::Impl* master_;
};

// A blocking read's deadline: its own timeout (the master's store_timeout when 0), and never
// past the client's gRPC deadline.
absl::Time StoreDeadline(int64_t timeout_ms, absl::Duration default_timeout,
                         const grpc::CallbackServerContext* context) {
  const absl::Time now = MonotonicNow();
  absl::Time deadline = now + (timeout_ms > 0 ? absl::Milliseconds(timeout_ms) : default_timeout);
  const auto client_deadline = context->deadline();
  if (client_deadline != std::chrono::system_clock::time_point::max()) {
    const absl::Duration left = absl::FromChrono(client_deadline) - absl::Now();
    deadline = std::min(deadline, now + left);
  }
  return deadline;
}

class StoreService : public pb::Store::CallbackService {
 public:
  explicit StoreService(MasterServer::Impl* master) : master_(master) {}

  grpc::ServerUnaryReactor* Set(grpc::CallbackServerContext* context, const pb::SetRequest* request,
                                pb::SetResponse*) override {
    return Reply(context, master_->WithStore(request->run_id(), [&](KvStore& store) {
      return store.Set(request->key(), request->value());
    }));
  }

  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context, const pb::GetRequest* request,
                                pb::GetResponse* response) override {
    auto* reactor = context->DefaultReactor();
    master_->StoreWait(request->run_id(), {request->key()},
                       StoreDeadline(request->timeout_ms(), master_->options().store_timeout, context),
                       [reactor, response](absl::StatusOr<std::vector<std::string>> values) {
                         if (values.ok()) response->set_value(std::move(values->front()));
                         reactor->Finish(ToGrpcStatus(values.status()));
                       });
    return reactor;
  }

  grpc::ServerUnaryReactor* Add(grpc::CallbackServerContext* context, const pb::AddRequest* request,
                                pb::AddResponse* response) override {
    absl::StatusOr<int64_t> value = master_->WithStore(
        request->run_id(), [&](KvStore& store) { return store.Add(request->key(), request->delta()); });
    if (value.ok()) response->set_value(*value);
    return Reply(context, value.status());
  }

  grpc::ServerUnaryReactor* CompareSet(grpc::CallbackServerContext* context,
                                       const pb::CompareSetRequest* request,
                                       pb::CompareSetResponse* response) override {
    absl::StatusOr<std::string> value = master_->WithStore(request->run_id(), [&](KvStore& store) {
      return store.CompareSet(request->key(), request->expected(), request->desired());
    });
    if (value.ok()) response->set_value(std::move(*value));
    return Reply(context, value.status());
  }

  grpc::ServerUnaryReactor* Wait(grpc::CallbackServerContext* context,
                                 const pb::WaitRequest* request, pb::WaitResponse*) override {
    auto* reactor = context->DefaultReactor();
    master_->StoreWait(request->run_id(), {request->keys().begin(), request->keys().end()},
                       StoreDeadline(request->timeout_ms(), master_->options().store_timeout, context),
                       [reactor](absl::StatusOr<std::vector<std::string>> values) {
                         reactor->Finish(ToGrpcStatus(values.status()));
                       });
    return reactor;
  }

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const pb::CheckRequest* request,
                                  pb::CheckResponse* response) override {
    absl::StatusOr<bool> all = master_->WithStore(request->run_id(), [&](KvStore& store) {
      return store.Check({request->keys().begin(), request->keys().end()});
    });
    if (all.ok()) response->set_all_exist(*all);
    return Reply(context, all.status());
  }

  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* context,
                                   const pb::DeleteRequest* request,
                                   pb::DeleteResponse* response) override {
    absl::StatusOr<bool> deleted = master_->WithStore(
        request->run_id(), [&](KvStore& store) { return store.Delete(request->key()); });
    if (deleted.ok()) response->set_deleted(*deleted);
    return Reply(context, deleted.status());
  }

  grpc::ServerUnaryReactor* NumKeys(grpc::CallbackServerContext* context,
                                    const pb::NumKeysRequest* request,
                                    pb::NumKeysResponse* response) override {
    response->set_count(
        master_->WithStore(request->run_id(), [](KvStore& store) { return store.NumKeys(); }));
    return Reply(context, absl::OkStatus());
  }

  grpc::ServerUnaryReactor* MultiGet(grpc::CallbackServerContext* context,
                                     const pb::MultiGetRequest* request,
                                     pb::MultiGetResponse* response) override {
    auto* reactor = context->DefaultReactor();
    master_->StoreWait(request->run_id(), {request->keys().begin(), request->keys().end()},
                       StoreDeadline(request->timeout_ms(), master_->options().store_timeout, context),
                       [reactor, response](absl::StatusOr<std::vector<std::string>> values) {
                         if (values.ok()) {
                           for (std::string& v : *values) response->add_values(std::move(v));
                         }
                         reactor->Finish(ToGrpcStatus(values.status()));
                       });
    return reactor;
  }

  grpc::ServerUnaryReactor* MultiSet(grpc::CallbackServerContext* context,
                                     const pb::MultiSetRequest* request,
                                     pb::MultiSetResponse*) override {
    return Reply(context, master_->WithStore(request->run_id(), [&](KvStore& store) {
      return store.MultiSet({request->keys().begin(), request->keys().end()},
                            {request->values().begin(), request->values().end()});
    }));
  }

 private:
  static grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context,
                                         const absl::Status& status) {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }

  MasterServer::Impl* master_;
};

}  // namespace

MasterServer::MasterServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MasterServer::~MasterServer() { Shutdown(absl::Seconds(1)); }

int MasterServer::port() const { return impl_->port; }

int MasterServer::SessionCount(const std::string& run_id) const {
  return impl_->SessionCount(run_id);
}

int MasterServer::session_end_fd() const { return impl_->session_end_fd(); }

int MasterServer::PendingStoreReads() const { return impl_->PendingStoreReads(); }

absl::StatusOr<std::unique_ptr<MasterServer>> MasterServer::Start(const MasterOptions& options) {
  auto impl = std::make_unique<Impl>(options);
  impl->services.push_back(std::make_unique<RendezvousService>(impl.get()));
  impl->services.push_back(std::make_unique<StoreService>(impl.get()));
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(
      options.host.find(':') != std::string::npos ? "[" + options.host + "]" : options.host, ":",
      options.port);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (options.tls.enabled()) {
    grpc::SslServerCredentialsOptions ssl(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = options.tls.ca_pem;
    ssl.pem_key_cert_pairs.push_back({options.tls.key_pem, options.tls.cert_pem});
    credentials = grpc::SslServerCredentials(ssl);
  }
  if (options.adopt_connections) {
    impl->acceptor = builder.experimental().AddExternalConnectionAcceptor(
        grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, credentials);
    impl->port = options.port;
  } else {
    builder.AddListeningPort(address, credentials, &impl->port);
  }
  for (auto& service : impl->services) builder.RegisterService(service.get());
  // Agents detect a dead master with HTTP/2 keepalive pings; accept them often.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A Store value may be 8 MiB (gRPC's default limit is 4 MiB); multi_set carries several.
  builder.SetMaxReceiveMessageSize(64 * 1024 * 1024);
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", address,
        ": the port is in use (another master?) or the address is not one of this host's"));
  }
  impl->StartTicker();
  return std::unique_ptr<MasterServer>(new MasterServer(std::move(impl)));
}

void MasterServer::AdoptConnection(int listen_fd, int fd) {
  absl::MutexLock lock(&impl_->adopt_mu);
  if (impl_->acceptor == nullptr || impl_->adopt_closed) {
    ::close(fd);
    return;
  }
  grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters connection;
  connection.listener_fd = listen_fd;
  connection.fd = fd;
  impl_->acceptor->HandleNewConnection(&connection);
}

void MasterServer::Shutdown(absl::Duration grace) {
  {
    absl::MutexLock lock(&impl_->adopt_mu);
    impl_->adopt_closed = true;
  }
  if (impl_->server == nullptr) return;
  impl_->AbortStoreReads();
  impl_->server->Shutdown(absl::ToChronoTime(absl::Now() + grace));
  impl_->StopTicker();
  impl_->server->Wait();
  impl_->server.reset();
}

}  // namespace ddprun
