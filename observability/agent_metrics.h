#pragma once
// What an agent shows on its --metrics-port: a snapshot its loop publishes whenever its
// workers change, read by the metrics server's threads at each scrape (docs/observability.md).
// Plain data: the agent binary stays free of prometheus-cpp (the plugin turns it into metrics).

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace ddprun {

/// Seconds spent in one part of restarts (agent/restart_timeline.h), counted in buckets as
/// a Prometheus histogram counts them: from a millisecond (a stop, a fork) to a minute (a
/// slow import on a loaded node).
struct DurationHistogram {
  static constexpr std::array<double, 14> kBounds = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                     0.5,   1,     2.5,  5,     10,   30,  60};
  std::array<uint64_t, kBounds.size() + 1> buckets{};  // not cumulative; the last: above all
  double sum = 0;
  uint64_t count = 0;

  void Observe(double seconds) {
    size_t i = 0;
    while (i < kBounds.size() && seconds > kBounds[i]) ++i;
    ++buckets[i];
    sum += seconds;
    ++count;
  }
};

struct AgentMetricsSnapshot {
  std::string run_id;
  int64_t round = -1;     // the round its workers run in (or last ran in); -1 before any
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT of that round
  // Its workers now: running, frozen, hung, succeeded, failed, stopped.
  std::map<std::string, int> workers;
  int64_t worker_starts = 0;  // workers started, over every round
  // Workers that ended, by cause (exit_code, signal, hang, stopped) and code (the exit code
  // or signal name; "0" for success).
  std::map<std::pair<std::string, std::string>, int64_t> worker_exits;
  // Requests the workers' TCPStore this agent serves has answered, by operation (multi-node
  // jobs; a one-node job's store is in its rank 0 worker).
  std::map<std::string, int64_t> store_operations;
  // Restarts as this node saw them, by part (detection, stop, rendezvous, spawn, connected,
  // barrier, and total).
  std::map<std::string, DurationHistogram> restart_parts;
  // How long this node was without a master each time one gave it its place back.
  DurationHistogram master_outages;
};

/// The agent's latest snapshot, shared between its loop and the metrics server.
class AgentMetricsBoard {
 public:
  void Publish(AgentMetricsSnapshot snapshot) {
    absl::MutexLock lock(&mu_);
    snapshot_ = std::move(snapshot);
  }
  /// Where Read takes the store's counts from, at each read (set before the first Read;
  /// called from the reader's thread: it must be thread-safe).
  void CountStoreWith(std::function<std::map<std::string, int64_t>()> counts) {
    store_counts_ = std::move(counts);
  }
  AgentMetricsSnapshot Read() const {
    AgentMetricsSnapshot snapshot;
    {
      absl::MutexLock lock(&mu_);
      snapshot = snapshot_;
    }
    if (store_counts_) snapshot.store_operations = store_counts_();
    return snapshot;
  }

 private:
  std::function<std::map<std::string, int64_t>()> store_counts_;
  mutable absl::Mutex mu_;
  AgentMetricsSnapshot snapshot_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ddprun
