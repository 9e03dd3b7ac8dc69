#pragma once
// The Store service (proto/ddprun/v1/store.proto): the key-value store workers share, one
// per run id. It serves from a StoreHost: the rendezvous master's state (the Store of the
// runs its agents joined), or a Store alone (StoreOnlyServer: the worker SDK's rank-0 store).
// Blocking reads wait in the host's stores without a thread; their replies run off its lock.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "observability/master_metrics_sink.h"
#include "store/run_stores.h"

namespace ddprun {

/// Where the Store service's calls go. Called from gRPC's threads.
class StoreHost {
 public:
  virtual ~StoreHost() = default;
  /// Runs `fn` on the run's store once the call may touch it (token, run id, a run this
  /// host serves); else returns why not.
  virtual absl::Status WithStore(absl::string_view token, const std::string& run_id,
                                 absl::FunctionRef<absl::Status(KvStore&)> fn) = 0;
  /// Parks a blocking read (RunStores::Wait) once the call may touch the run; `done` runs
  /// once, off the host's lock, with the values or why not. `peer`: the client's connection.
  virtual ParkedRead StoreWait(absl::string_view token, const std::string& peer,
                               const std::string& run_id, std::vector<std::string> keys,
                               absl::Time deadline, KvStore::Done done) = 0;
  /// RunStores::Cancel.
  virtual bool CancelStoreWait(const std::string& run_id, const ParkedRead& read) = 0;
  /// How long a blocking read without its own timeout waits (torchrun's read_timeout).
  virtual absl::Duration store_timeout() const = 0;
  /// Where Store calls are counted.
  virtual MasterMetricsSink& metrics() = 0;
};

/// What every host checks before a Store call touches a run: the token (`expected` empty:
/// none needed), the run id's form, and, when the host serves one run only, that it is it.
absl::Status CheckStoreAccess(absl::string_view expected_token, absl::string_view token,
                              const std::string& run_id,
                              const std::optional<std::string>& only_run_id);

std::unique_ptr<grpc::Service> MakeStoreService(StoreHost* host);

}  // namespace ddprun
