#include "rpc/store_only_server.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/status_macros.h"

namespace ddprun {

StoreOnlyHost::~StoreOnlyHost() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_.Signal();
  }
  if (ticker_.joinable()) ticker_.join();
}

absl::Status StoreOnlyHost::Access(absl::string_view token, const std::string& run_id) {
  DDPRUN_RETURN_IF_ERROR(CheckStoreAccess(options_.token, token, run_id, options_.only_run_id));
  if (!stores_.Holds(run_id) && stores_.size() >= options_.max_runs) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this store holds ", stores_.size(), " runs, the most it holds at once"));
  }
  return absl::OkStatus();
}

void StoreOnlyHost::ReleaseAndRunPending(absl::ReleasableMutexLock& lock) {
  std::vector<std::function<void()>> pending = stores_.TakeCompletions();
  lock.Release();
  for (auto& completion : pending) completion();
}

absl::Status StoreOnlyHost::WithStore(absl::string_view token, const std::string& run_id,
                                      absl::FunctionRef<absl::Status(KvStore&)> fn) {
  absl::ReleasableMutexLock lock(&mu_);
  absl::Status status = Access(token, run_id);
  if (status.ok()) status = stores_.Call(run_id, fn);
  ReleaseAndRunPending(lock);
  return status;
}

ParkedRead StoreOnlyHost::StoreWait(absl::string_view token, const std::string& peer,
                                    const std::string& run_id, std::vector<std::string> keys,
                                    absl::Time deadline, KvStore::Done done) {
  absl::ReleasableMutexLock lock(&mu_);
  ParkedRead parked;
  if (absl::Status access = Access(token, run_id); !access.ok()) {
    stores_.Refuse(std::move(done), access);
  } else {
    parked = stores_.Wait(run_id, peer, std::move(keys), MonotonicNow(), deadline, std::move(done));
    // Only when it comes before the ticker's wake-up: not a thread switch per read.
    if (parked.deadline < ticker_wakes_at_) wake_.Signal();
  }
  ReleaseAndRunPending(lock);
  return parked;
}

bool StoreOnlyHost::CancelStoreWait(const std::string& run_id, const ParkedRead& read) {
  absl::MutexLock lock(&mu_);
  return stores_.Cancel(run_id, read);
}

void StoreOnlyHost::StartTicker() {
  ticker_ = std::thread([this] { TickerLoop(); });
}

void StoreOnlyHost::AbortStoreReads() {
  absl::ReleasableMutexLock lock(&mu_);
  stores_.AbortAll(absl::UnavailableError("the store is shutting down"));
  ReleaseAndRunPending(lock);
}

int StoreOnlyHost::PendingStoreReads() {
  absl::MutexLock lock(&mu_);
  return stores_.Waiting();
}

std::pair<int64_t, int64_t> StoreOnlyHost::StoreBytes() {
  absl::MutexLock lock(&mu_);
  return stores_.Bytes();
}

void StoreOnlyHost::TickerLoop() {
  mu_.Lock();
  while (!stopping_) {
    stores_.Expire(MonotonicNow());
    if (std::vector<std::function<void()>> pending = stores_.TakeCompletions(); !pending.empty()) {
      mu_.Unlock();
      for (auto& completion : pending) completion();
      mu_.Lock();
      continue;
    }
    const absl::Time now = MonotonicNow();
    ticker_wakes_at_ = std::min(stores_.NextDeadline(), now + absl::Hours(1));
    wake_.WaitWithTimeout(&mu_, std::max(ticker_wakes_at_ - now, absl::Milliseconds(1)));
    ticker_wakes_at_ = absl::InfinitePast();  // awake: it looks at every store anyway
  }
  mu_.Unlock();
}

absl::StatusOr<std::unique_ptr<StoreOnlyServer>> StoreOnlyServer::Start(
    const StoreOnlyOptions& options) {
  auto host = std::make_unique<StoreOnlyHost>(options);
  std::unique_ptr<grpc::Service> service = MakeStoreService(host.get());
  absl::StatusOr<std::unique_ptr<GrpcServing>> serving =
      GrpcServing::Start(options.serving, {service.get()});
  if (!serving.ok()) return serving.status();
  host->StartTicker();
  return std::unique_ptr<StoreOnlyServer>(
      new StoreOnlyServer(std::move(host), std::move(service), std::move(*serving)));
}

StoreOnlyServer::StoreOnlyServer(std::unique_ptr<StoreOnlyHost> host,
                                 std::unique_ptr<grpc::Service> service,
                                 std::unique_ptr<GrpcServing> serving)
    : host_(std::move(host)),
      service_(std::move(service)),
      serving_(std::move(serving)),
      port_(serving_->port()) {}

StoreOnlyServer::~StoreOnlyServer() { Shutdown(absl::Seconds(1)); }

void StoreOnlyServer::Shutdown(absl::Duration grace) {
  if (serving_ == nullptr) return;
  serving_->StopAccepting();
  host_->AbortStoreReads();
  serving_->Shutdown(grace);
  serving_.reset();
}

}  // namespace ddprun
