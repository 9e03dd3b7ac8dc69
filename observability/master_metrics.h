#pragma once
// MasterMetrics: what the master counts for Prometheus (docs/observability.md lists every
// metric). Events are counted as they happen (thread-safe: prometheus-cpp's counters and
// histograms are atomic); the run's state (round, nodes, restarts) is read at scrape time
// from the same status `ddprun status` shows, so it can never disagree with it.

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ddprun/v1/admin.pb.h"
#include "observability/agent_metrics.h"
#include "observability/master_metrics_sink.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"

namespace ddprun {

/// An agent's metrics, from what it published.
std::vector<prometheus::MetricFamily> AgentMetricFamilies(const AgentMetricsSnapshot& agent);

/// Counts what the master reports for Prometheus. Each Store call's series is made once:
/// counting a call takes no lock and looks up no label.
class MasterMetrics : public MasterMetricsSink {
 public:
  MasterMetrics();

  void RoundBegan(const std::string& run_id, absl::Duration rendezvous) override;
  void RoundEnded(const std::string& run_id, absl::Duration lasted) override;
  void StoreCall(StoreOp op, bool ok, absl::Duration latency) override;  // lock-free
  void ForgetRun(const std::string& run_id) override;

  /// Everything, with the runs' state from `status` (the master's StatusReply).
  std::vector<prometheus::MetricFamily> Collect(const v1::StatusReply& status) const;

 private:
  struct RunSeries {
    prometheus::Histogram* rounds = nullptr;
    prometheus::Histogram* rendezvous = nullptr;
  };
  RunSeries& Series(const std::string& run_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>& round_duration_;
  prometheus::Family<prometheus::Histogram>& rendezvous_duration_;
  struct StoreSeries {
    prometheus::Counter* ok = nullptr;
    prometheus::Counter* error = nullptr;
    prometheus::Histogram* latency = nullptr;
  };
  std::array<StoreSeries, kStoreOps> store_;  // made in the constructor, then only read
  absl::Mutex mu_;                            // guards the map, not the metrics (atomic)
  std::map<std::string, RunSeries> runs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddprun
