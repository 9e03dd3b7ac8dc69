#pragma once
// MasterMetrics: what the master counts for Prometheus (docs/observability.md lists every
// metric). Events are counted as they happen (thread-safe: prometheus-cpp's counters and
// histograms are atomic); the run's state (round, nodes, restarts) is read at scrape time
// from the same status `ddprun status` shows, so it can never disagree with it.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ddprun/v1/admin.pb.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "rendezvous/agent_metrics.h"

namespace ddprun {

/// An agent's metrics, from what it published.
std::vector<prometheus::MetricFamily> AgentMetricFamilies(const AgentMetricsSnapshot& agent);

class MasterMetrics {
 public:
  MasterMetrics();

  /// A round of `run_id` began after a rendezvous of `rendezvous`.
  void RoundBegan(const std::string& run_id, absl::Duration rendezvous);
  /// A round of `run_id` ended after `lasted`.
  void RoundEnded(const std::string& run_id, absl::Duration lasted);
  /// One Store call (`op`: set, get, add, ...), and how long it took to answer.
  void StoreCall(const char* op, bool ok, absl::Duration latency);
  /// The run is forgotten: its series go.
  void ForgetRun(const std::string& run_id);

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
  prometheus::Family<prometheus::Counter>& store_calls_;
  prometheus::Family<prometheus::Histogram>& store_latency_;
  absl::Mutex mu_;  // guards the maps, not the metrics (atomic)
  std::map<std::string, RunSeries> runs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, prometheus::Histogram*> store_latency_by_op_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddprun
