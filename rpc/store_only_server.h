#pragma once
// A Store served alone, without a rendezvous: the worker SDK's rank-0 store (its StoreServer),
// when the launcher gives the workers none. The Store service (store_service.h) over a host
// whose runs are made by their first call. Its token, run id, limits, TLS and accept loop are
// the master's (the same RunStores, CheckStoreAccess and GrpcServing).

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "rpc/grpc_serving.h"
#include "rpc/store_service.h"
#include "store/run_stores.h"

namespace ddprun {

struct StoreOnlyOptions {
  GrpcServingOptions serving;              // where it listens, TLS, per-connection bounds
  std::string token;                       // empty: calls need no token
  std::optional<std::string> only_run_id;  // set: calls for any other run are refused
  // How long a blocking read without its own timeout waits (torchrun's read_timeout).
  absl::Duration store_timeout = absl::Seconds(60);
  StoreLimits limits;
  int max_runs = 1000;  // runs held at once
};

/// The StoreHost of a Store served alone: each run is made by its first call, and lives as
/// long as the host.
class StoreOnlyHost : public StoreHost {
 public:
  explicit StoreOnlyHost(StoreOnlyOptions options)
      : options_(std::move(options)), stores_(options_.limits) {}
  ~StoreOnlyHost() override;  // stops the ticker

  absl::Status WithStore(absl::string_view token, const std::string& run_id,
                         absl::FunctionRef<absl::Status(KvStore&)> fn) override;
  ParkedRead StoreWait(absl::string_view token, const std::string& peer, const std::string& run_id,
                       std::vector<std::string> keys, absl::Time deadline,
                       KvStore::Done done) override;
  bool CancelStoreWait(const std::string& run_id, const ParkedRead& read) override;
  absl::Duration store_timeout() const override { return options_.store_timeout; }
  MasterMetricsSink& metrics() override { return NoMasterMetrics(); }

  /// A thread that fails blocking reads at their deadline.
  void StartTicker();
  /// Ends every blocking read now, and any that comes later.
  void AbortStoreReads();
  int PendingStoreReads();
  /// RunStores::Bytes.
  std::pair<int64_t, int64_t> StoreBytes();

 private:
  // OK when a call may touch the run: the checks every host makes, and room for a new run.
  absl::Status Access(absl::string_view token, const std::string& run_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases `lock`, then runs the Store replies queued while it was held.
  void ReleaseAndRunPending(absl::ReleasableMutexLock& lock) ABSL_UNLOCK_FUNCTION(mu_);
  void TickerLoop();

  const StoreOnlyOptions options_;
  absl::Mutex mu_;
  absl::CondVar wake_;
  RunStores stores_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // While the ticker sleeps: when it wakes by itself. InfinitePast while it is awake.
  absl::Time ticker_wakes_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::thread ticker_;
};

class StoreOnlyServer {
 public:
  /// Binds and serves. An error names the address (and says so when it is in use).
  static absl::StatusOr<std::unique_ptr<StoreOnlyServer>> Start(const StoreOnlyOptions& options);
  ~StoreOnlyServer();

  int port() const { return port_; }
  /// Blocking reads waiting for keys, across runs.
  int PendingStoreReads() const { return host_->PendingStoreReads(); }
  /// Stops accepting, ends the blocking reads, lets calls finish until `grace` has passed,
  /// then cancels the rest.
  void Shutdown(absl::Duration grace);

 private:
  StoreOnlyServer(std::unique_ptr<StoreOnlyHost> host, std::unique_ptr<grpc::Service> service,
                  std::unique_ptr<GrpcServing> serving);
  std::unique_ptr<StoreOnlyHost> host_;
  std::unique_ptr<grpc::Service> service_;  // what serving_ serves
  std::unique_ptr<GrpcServing> serving_;    // null once shut down
  const int port_;
};

}  // namespace ddprun
