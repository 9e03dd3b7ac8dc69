#include "rpc/store_service.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "ddprun/v1/store.grpc.pb.h"
#include "rendezvous/run_access.h"
#include "rpc/wire.h"

namespace ddprun {
namespace {

namespace pb = ::ddprun::v1;

// The token the client sent in its call's metadata (empty: none).
absl::string_view TokenOf(const grpc::CallbackServerContext* context) {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find(kTokenMetadataKey);
  if (it == metadata.end()) return {};
  return absl::string_view(it->second.data(), it->second.size());
}

// A blocking read's deadline: its own timeout (the host's store_timeout when 0), and never
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

// A blocking read's call. It ends when the store answers, or, when the client cancels it
// first, at once and with its waiter dropped from the store (it would stay parked there
// until its deadline otherwise). Finish is called exactly once, and never before Parked:
// gRPC may delete the reactor as soon as it has finished.
class ReadReactor : public grpc::ServerUnaryReactor {
 public:
  ReadReactor(StoreHost* host, std::string run_id) : host_(host), run_id_(std::move(run_id)) {}

  // The store's answer (from its `done`).
  void Complete(grpc::Status status) {
    {
      absl::MutexLock lock(&mu_);
      if (!parked_) {  // answered at once, inside StoreWait
        early_ = std::move(status);
        return;
      }
    }
    Finish(status);
  }

  // What StoreWait returned.
  void Parked(const ParkedRead& read) {
    std::optional<grpc::Status> finish;
    {
      absl::MutexLock lock(&mu_);
      parked_ = true;
      read_ = read;
      if (early_) {
        finish = std::move(early_);
      } else if (cancelled_ && host_->CancelStoreWait(run_id_, read_)) {
        finish = grpc::Status::CANCELLED;
      }
    }
    if (finish) Finish(*finish);
  }

  void OnCancel() override {
    bool dropped = false;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      dropped = parked_ && host_->CancelStoreWait(run_id_, read_);
    }
    if (dropped) Finish(grpc::Status::CANCELLED);
  }

  void OnDone() override { delete this; }

 private:
  StoreHost* const host_;
  const std::string run_id_;
  absl::Mutex mu_;
  bool parked_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  ParkedRead read_ ABSL_GUARDED_BY(mu_);
  std::optional<grpc::Status> early_ ABSL_GUARDED_BY(mu_);
};

// One Store call, for the metrics: its operation and when it came.
struct StoreCall {
  StoreOp op;
  absl::Time start;
};

class StoreService : public pb::Store::CallbackService {
 public:
  explicit StoreService(StoreHost* host) : host_(host) {}

  grpc::ServerUnaryReactor* Set(grpc::CallbackServerContext* context, const pb::SetRequest* request,
                                pb::SetResponse*) override {
    const StoreCall call{StoreOp::kSet, MonotonicNow()};
    return Reply(context, call,
                 host_->WithStore(TokenOf(context), request->run_id(), [&](KvStore& store) {
                   return store.Set(request->key(), request->value());
                 }));
  }

  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context, const pb::GetRequest* request,
                                pb::GetResponse* response) override {
    const StoreCall call{StoreOp::kGet, MonotonicNow()};
    return BlockingRead(context, call, request->run_id(), {request->key()}, request->timeout_ms(),
                        [response](std::vector<std::string>& values) {
                          response->set_value(std::move(values.front()));
                        });
  }

  grpc::ServerUnaryReactor* Add(grpc::CallbackServerContext* context, const pb::AddRequest* request,
                                pb::AddResponse* response) override {
    const StoreCall call{StoreOp::kAdd, MonotonicNow()};
    return Reply(context, call,
                 host_->WithStore(TokenOf(context), request->run_id(), [&](KvStore& store) {
                   return Answer(store.Add(request->key(), request->delta()),
                                 [&](int64_t v) { response->set_value(v); });
                 }));
  }

  grpc::ServerUnaryReactor* CompareSet(grpc::CallbackServerContext* context,
                                       const pb::CompareSetRequest* request,
                                       pb::CompareSetResponse* response) override {
    const StoreCall call{StoreOp::kCompareSet, MonotonicNow()};
    return Reply(
        context, call, host_->WithStore(TokenOf(context), request->run_id(), [&](KvStore& store) {
          return Answer(store.CompareSet(request->key(), request->expected(), request->desired()),
                        [&](std::string& v) { response->set_value(std::move(v)); });
        }));
  }

  grpc::ServerUnaryReactor* Wait(grpc::CallbackServerContext* context,
                                 const pb::WaitRequest* request, pb::WaitResponse*) override {
    const StoreCall call{StoreOp::kWait, MonotonicNow()};
    return BlockingRead(context, call, request->run_id(),
                        {request->keys().begin(), request->keys().end()}, request->timeout_ms(),
                        nullptr);
  }

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const pb::CheckRequest* request,
                                  pb::CheckResponse* response) override {
    const StoreCall call{StoreOp::kCheck, MonotonicNow()};
    return Reply(context, call,
                 host_->WithStore(TokenOf(context), request->run_id(), [&](KvStore& store) {
                   return Answer(store.Check({request->keys().begin(), request->keys().end()}),
                                 [&](bool all) { response->set_all_exist(all); });
                 }));
  }

  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* context,
                                   const pb::DeleteRequest* request,
                                   pb::DeleteResponse* response) override {
    const StoreCall call{StoreOp::kDelete, MonotonicNow()};
    return Reply(context, call,
                 host_->WithStore(TokenOf(context), request->run_id(), [&](KvStore& store) {
                   return Answer(store.Delete(request->key()),
                                 [&](bool deleted) { response->set_deleted(deleted); });
                 }));
  }

  grpc::ServerUnaryReactor* NumKeys(grpc::CallbackServerContext* context,
                                    const pb::NumKeysRequest* request,
                                    pb::NumKeysResponse* response) override {
    const StoreCall call{StoreOp::kNumKeys, MonotonicNow()};
    return Reply(context, call,
                 host_->WithStore(TokenOf(context), request->run_id(), [&](KvStore& store) {
                   response->set_count(store.NumKeys());
                   return absl::OkStatus();
                 }));
  }

  grpc::ServerUnaryReactor* MultiGet(grpc::CallbackServerContext* context,
                                     const pb::MultiGetRequest* request,
                                     pb::MultiGetResponse* response) override {
    const StoreCall call{StoreOp::kMultiGet, MonotonicNow()};
    return BlockingRead(context, call, request->run_id(),
                        {request->keys().begin(), request->keys().end()}, request->timeout_ms(),
                        [response](std::vector<std::string>& values) {
                          for (std::string& v : values) response->add_values(std::move(v));
                        });
  }

  grpc::ServerUnaryReactor* MultiSet(grpc::CallbackServerContext* context,
                                     const pb::MultiSetRequest* request,
                                     pb::MultiSetResponse*) override {
    const StoreCall call{StoreOp::kMultiSet, MonotonicNow()};
    return Reply(context, call,
                 host_->WithStore(TokenOf(context), request->run_id(), [&](KvStore& store) {
                   return store.MultiSet({request->keys().begin(), request->keys().end()},
                                         {request->values().begin(), request->values().end()});
                 }));
  }

 private:
  // Parks a read of `keys` in the run's store; `fill` (if any) puts the values found into
  // the response before the call ends.
  grpc::ServerUnaryReactor* BlockingRead(grpc::CallbackServerContext* context,
                                         const StoreCall& call, const std::string& run_id,
                                         std::vector<std::string> keys, int64_t timeout_ms,
                                         std::function<void(std::vector<std::string>&)> fill) {
    auto* reactor = new ReadReactor(host_, run_id);
    reactor->Parked(host_->StoreWait(TokenOf(context), context->peer(), run_id, std::move(keys),
                                     StoreDeadline(timeout_ms, host_->store_timeout(), context),
                                     [this, call, reactor, fill = std::move(fill)](
                                         absl::StatusOr<std::vector<std::string>> values) {
                                       host_->metrics().StoreCall(call.op, values.ok(),
                                                                  MonotonicNow() - call.start);
                                       if (values.ok() && fill) fill(*values);
                                       reactor->Complete(ToGrpcStatus(values.status()));
                                     }));
    return reactor;
  }

  grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context, const StoreCall& call,
                                  const absl::Status& status) {
    host_->metrics().StoreCall(call.op, status.ok(), MonotonicNow() - call.start);
    return FinishUnary(context, status);
  }

  // The status of `value`, after `fill` has put it into the response when there is one.
  template <typename T, typename Fill>
  static absl::Status Answer(absl::StatusOr<T> value, Fill fill) {
    if (value.ok()) fill(*value);
    return value.status();
  }

  StoreHost* host_;
};

}  // namespace

absl::Status CheckStoreAccess(absl::string_view expected_token, absl::string_view token,
                              const std::string& run_id,
                              const std::optional<std::string>& only_run_id) {
  DDPRUN_RETURN_IF_ERROR(CheckToken(expected_token, token, "Store token",
                                    "ddprun hands it to workers in the file named by "
                                    "DDPRUN_STORE_TOKEN_FILE"));
  DDPRUN_RETURN_IF_ERROR(CheckRunId(run_id, "run_id"));
  if (only_run_id && run_id != *only_run_id) {
    return absl::NotFoundError(
        absl::StrCat("this store serves another run than '", run_id,
                     "': the worker's TORCHELASTIC_RUN_ID is not its launcher's run"));
  }
  return absl::OkStatus();
}

std::unique_ptr<grpc::Service> MakeStoreService(StoreHost* host) {
  return std::make_unique<StoreService>(host);
}

}  // namespace ddprun
