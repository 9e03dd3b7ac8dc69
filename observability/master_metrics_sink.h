#pragma once
// What the master counts as it goes (docs/observability.md lists the metrics), as the master
// sees it: an interface, so that the master links no metrics library. MasterMetrics
// (master_metrics.h) counts for Prometheus; a master given none (the worker SDK's store,
// tests) counts nothing.

#include <string>

#include "absl/time/time.h"

namespace ddprun {

/// The Store service's calls, each with its own series.
enum class StoreOp {
  kSet,
  kGet,
  kAdd,
  kCompareSet,
  kWait,
  kCheck,
  kDelete,
  kNumKeys,
  kMultiGet,
  kMultiSet
};
inline constexpr int kStoreOps = static_cast<int>(StoreOp::kMultiSet) + 1;

class MasterMetricsSink {
 public:
  virtual ~MasterMetricsSink() = default;
  /// A round of `run_id` began after a rendezvous of `rendezvous`.
  virtual void RoundBegan(const std::string& run_id, absl::Duration rendezvous) = 0;
  /// A round of `run_id` ended after `lasted`.
  virtual void RoundEnded(const std::string& run_id, absl::Duration lasted) = 0;
  /// One Store call, and how long it took to answer. Called from many threads at once.
  virtual void StoreCall(StoreOp op, bool ok, absl::Duration latency) = 0;
  /// The run is forgotten: its series go.
  virtual void ForgetRun(const std::string& run_id) = 0;
};

/// A sink that counts nothing, for a master nobody scrapes.
inline MasterMetricsSink& NoMasterMetrics() {
  class Nothing : public MasterMetricsSink {
    void RoundBegan(const std::string&, absl::Duration) override {}
    void RoundEnded(const std::string&, absl::Duration) override {}
    void StoreCall(StoreOp, bool, absl::Duration) override {}
    void ForgetRun(const std::string&) override {}
  };
  static Nothing* const nothing = new Nothing;
  return *nothing;
}

}  // namespace ddprun
