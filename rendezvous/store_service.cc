#include "rendezvous/store_service.h"

#include <algorithm>
#include <chrono>

#include "common/clock.h"
#include "ddprun/v1/store.grpc.pb.h"
#include "rendezvous/wire.h"

namespace ddprun {
namespace {

namespace pb = ::ddprun::v1;

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
  explicit StoreService(MasterState* master) : master_(master) {}

  grpc::ServerUnaryReactor* Set(grpc::CallbackServerContext* context, const pb::SetRequest* request,
                                pb::SetResponse*) override {
    return Reply(context, master_->WithStore(request->run_id(), [&](KvStore& store) {
      return store.Set(request->key(), request->value());
    }));
  }

  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context, const pb::GetRequest* request,
                                pb::GetResponse* response) override {
    auto* reactor = context->DefaultReactor();
    master_->StoreWait(
        request->run_id(), {request->key()},
        StoreDeadline(request->timeout_ms(), master_->options().store_timeout, context),
        [reactor, response](absl::StatusOr<std::vector<std::string>> values) {
          if (values.ok()) response->set_value(std::move(values->front()));
          reactor->Finish(ToGrpcStatus(values.status()));
        });
    return reactor;
  }

  grpc::ServerUnaryReactor* Add(grpc::CallbackServerContext* context, const pb::AddRequest* request,
                                pb::AddResponse* response) override {
    absl::StatusOr<int64_t> value = master_->WithStore(request->run_id(), [&](KvStore& store) {
      return store.Add(request->key(), request->delta());
    });
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
    master_->StoreWait(
        request->run_id(), {request->keys().begin(), request->keys().end()},
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
    master_->StoreWait(
        request->run_id(), {request->keys().begin(), request->keys().end()},
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

  MasterState* master_;
};

}  // namespace

std::unique_ptr<grpc::Service> MakeStoreService(MasterState* master) {
  return std::make_unique<StoreService>(master);
}

}  // namespace ddprun
