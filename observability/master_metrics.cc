#include "observability/master_metrics.h"

#include <limits>

namespace ddprun {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Rounds last from seconds (a crash loop) to weeks; rendezvous from milliseconds to the
// join timeout.
const prometheus::Histogram::BucketBoundaries& RoundBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{
      1, 10, 60, 300, 1800, 3600, 4 * 3600, 24 * 3600, 7 * 24 * 3600};
  return *b;
}
const prometheus::Histogram::BucketBoundaries& RendezvousBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{
      0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600};
  return *b;
}
// Store calls answer in microseconds; blocking reads wait for other ranks.
const prometheus::Histogram::BucketBoundaries& StoreBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{
      0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 300};
  return *b;
}

// A family of one type, whose series the caller adds.
MetricFamily Family(const std::string& name, const std::string& help, MetricType type) {
  MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  return family;
}

// A DurationHistogram as Prometheus's cumulative buckets, with `labels`.
ClientMetric HistogramMetric(std::vector<ClientMetric::Label> labels,
                             const DurationHistogram& seen) {
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.histogram.sample_count = seen.count;
  metric.histogram.sample_sum = seen.sum;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < seen.buckets.size(); ++i) {
    cumulative += seen.buckets[i];
    metric.histogram.bucket.push_back({cumulative, i < DurationHistogram::kBounds.size()
                                                       ? DurationHistogram::kBounds[i]
                                                       : std::numeric_limits<double>::infinity()});
  }
  return metric;
}

void AddValue(MetricFamily& family, std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric metric;
  metric.label = std::move(labels);
  if (family.type == MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
}

// A metric with one series per run: its family, and its value in the run's status.
struct PerRun {
  MetricFamily family;
  double (*value)(const v1::RunStatus&);
};

std::vector<PerRun> PerRunMetrics() {
  return {{Family("ddprun_round", "The run's current (or last) round; -1 before the first",
                  MetricType::Gauge),
           [](const v1::RunStatus& r) -> double { return r.round(); }},
          {Family("ddprun_rounds_total", "Rounds the run has started", MetricType::Counter),
           [](const v1::RunStatus& r) -> double { return r.round() + 1; }},
          {Family("ddprun_world_size", "Workers in the running round (0 when none runs)",
                  MetricType::Gauge),
           [](const v1::RunStatus& r) -> double { return r.world_size(); }},
          {Family("ddprun_nodes_excluded", "Hosts the run keeps out now", MetricType::Gauge),
           [](const v1::RunStatus& r) -> double { return r.excluded_now(); }},
          {Family("ddprun_restarts_total",
                  "Restarts of the run's workers so far (TORCHELASTIC_RESTART_COUNT)",
                  MetricType::Counter),
           [](const v1::RunStatus& r) -> double { return r.restarts_used(); }},
          {Family("ddprun_restarts_left", "Restarts left of --max-restarts", MetricType::Gauge),
           [](const v1::RunStatus& r) -> double { return r.restarts_left(); }},
          {Family("ddprun_sessions", "Agents' sessions (gRPC streams) the master holds in the run",
                  MetricType::Gauge),
           [](const v1::RunStatus& r) -> double { return r.sessions(); }},
          {Family("ddprun_keep_alive_misses_total",
                  "Nodes dropped for sending no heartbeat for keep_alive_interval x "
                  "keep_alive_max_attempt",
                  MetricType::Counter),
           [](const v1::RunStatus& r) -> double { return r.keep_alive_misses(); }}};
}

}  // namespace

std::vector<MetricFamily> AgentMetricFamilies(const AgentMetricsSnapshot& agent) {
  const ClientMetric::Label id{"run_id", agent.run_id};
  MetricFamily workers =
      Family("ddprun_agent_workers",
             "This node's workers, by state (running, frozen, hung, succeeded, failed, stopped)",
             MetricType::Gauge);
  for (const auto& [state, n] : agent.workers) AddValue(workers, {id, {"state", state}}, n);
  MetricFamily round = Family(
      "ddprun_agent_round", "The round this node's workers run in (or last ran in); -1 before any",
      MetricType::Gauge);
  AddValue(round, {id}, static_cast<double>(agent.round));
  MetricFamily restart = Family("ddprun_agent_restart_count",
                                "TORCHELASTIC_RESTART_COUNT of that round", MetricType::Gauge);
  AddValue(restart, {id}, agent.restart_count);
  MetricFamily starts = Family("ddprun_agent_worker_starts_total",
                               "Workers this node started, over every round", MetricType::Counter);
  AddValue(starts, {id}, static_cast<double>(agent.worker_starts));
  MetricFamily exits =
      Family("ddprun_agent_worker_exits_total",
             "This node's workers that ended, by cause (exit_code, signal, hang, timer, "
             "stopped) and code",
             MetricType::Counter);
  for (const auto& [cause, n] : agent.worker_exits) {
    AddValue(exits, {id, {"cause", cause.first}, {"code", cause.second}}, static_cast<double>(n));
  }
  MetricFamily store =
      Family("ddprun_agent_store_operations_total",
             "Requests the workers' TCPStore this agent serves has answered, by operation",
             MetricType::Counter);
  for (const auto& [op, n] : agent.store_operations) {
    AddValue(store, {id, {"op", op}}, static_cast<double>(n));
  }
  MetricFamily restarts = Family(
      "ddprun_agent_restart_seconds",
      "Where restarts went on this node, by part: detection, stop, rendezvous, spawn, "
      "connected (every rank on the store), barrier (every rank past the store barrier), total",
      MetricType::Histogram);
  for (const auto& [part, seen] : agent.restart_parts) {
    restarts.metric.push_back(HistogramMetric({id, {"part", part}}, seen));
  }
  MetricFamily outages =
      Family("ddprun_agent_master_outage_seconds",
             "How long this node was without a rendezvous master, its workers going on, each "
             "time a master gave it its place back",
             MetricType::Histogram);
  if (agent.master_outages.count > 0) {
    outages.metric.push_back(HistogramMetric({id}, agent.master_outages));
  }
  return {std::move(workers), std::move(round), std::move(restart),  std::move(starts),
          std::move(exits),   std::move(store), std::move(restarts), std::move(outages)};
}

MasterMetrics::MasterMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      round_duration_(prometheus::BuildHistogram()
                          .Name("ddprun_round_duration_seconds")
                          .Help("How long each round of a run ran, from its start to its stop")
                          .Register(*registry_)),
      rendezvous_duration_(prometheus::BuildHistogram()
                               .Name("ddprun_rendezvous_duration_seconds")
                               .Help("How long each rendezvous took, from its start to its "
                                     "round's start")
                               .Register(*registry_)) {
  auto& calls = prometheus::BuildCounter()
                    .Name("ddprun_store_operations_total")
                    .Help("Store calls the master answered, by operation and result")
                    .Register(*registry_);
  auto& latency = prometheus::BuildHistogram()
                      .Name("ddprun_store_operation_duration_seconds")
                      .Help(
                          "How long Store calls took to answer (blocking reads: until "
                          "their keys were there)")
                      .Register(*registry_);
  static constexpr std::array<const char*, kStoreOps> kNames = {
      "set",   "get",    "add",      "compare_set", "wait",
      "check", "delete", "num_keys", "multi_get",   "multi_set"};
  for (int i = 0; i < kStoreOps; ++i) {
    store_[i].ok = &calls.Add({{"op", kNames[i]}, {"result", "ok"}});
    store_[i].error = &calls.Add({{"op", kNames[i]}, {"result", "error"}});
    store_[i].latency = &latency.Add({{"op", kNames[i]}}, StoreBuckets());
  }
}

MasterMetrics::RunSeries& MasterMetrics::Series(const std::string& run_id) {
  RunSeries& series = runs_[run_id];
  if (series.rounds == nullptr) {
    series.rounds = &round_duration_.Add({{"run_id", run_id}}, RoundBuckets());
    series.rendezvous = &rendezvous_duration_.Add({{"run_id", run_id}}, RendezvousBuckets());
  }
  return series;
}

void MasterMetrics::RoundBegan(const std::string& run_id, absl::Duration rendezvous) {
  absl::MutexLock lock(&mu_);
  Series(run_id).rendezvous->Observe(absl::ToDoubleSeconds(rendezvous));
}

void MasterMetrics::RoundEnded(const std::string& run_id, absl::Duration lasted) {
  absl::MutexLock lock(&mu_);
  Series(run_id).rounds->Observe(absl::ToDoubleSeconds(lasted));
}

void MasterMetrics::StoreCall(StoreOp op, bool ok, absl::Duration latency) {
  const StoreSeries& series = store_[static_cast<int>(op)];
  (ok ? series.ok : series.error)->Increment();
  series.latency->Observe(absl::ToDoubleSeconds(latency));
}

void MasterMetrics::ForgetRun(const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return;
  round_duration_.Remove(it->second.rounds);
  rendezvous_duration_.Remove(it->second.rendezvous);
  runs_.erase(it);
}

std::vector<MetricFamily> MasterMetrics::Collect(const v1::StatusReply& status) const {
  std::vector<PerRun> per_run = PerRunMetrics();
  MetricFamily runs = Family("ddprun_runs", "Runs the master holds, by state", MetricType::Gauge);
  MetricFamily nodes = Family("ddprun_nodes",
                              "Nodes holding a session in the run, by state (running, "
                              "finished, waiting, idle, excluded)",
                              MetricType::Gauge);
  MetricFamily failures = Family("ddprun_worker_failures_total",
                                 "Failed workers the nodes reported for their own ranks, by "
                                 "cause (exit_code, signal, hang: no heartbeat, timer: a "
                                 "FileTimer expired) and code (the exit code or signal name)",
                                 MetricType::Counter);
  std::map<std::string, int> runs_by_state = {
      {"gathering", 0}, {"running", 0}, {"finishing", 0}, {"ended", 0}};
  for (const v1::RunStatus& run : status.runs()) {
    ++runs_by_state[run.state()];
    const ClientMetric::Label id{"run_id", run.run_id()};
    for (PerRun& metric : per_run) AddValue(metric.family, {id}, metric.value(run));
    const std::map<std::string, int32_t> by_state(run.node_states().begin(),
                                                  run.node_states().end());
    for (const auto& [state, n] : by_state) AddValue(nodes, {id, {"state", state}}, n);
    for (const v1::FailureCount& f : run.worker_failures()) {
      AddValue(failures, {id, {"cause", f.cause()}, {"code", f.code()}}, f.count());
    }
  }
  for (const auto& [state, n] : runs_by_state) AddValue(runs, {{"state", state}}, n);
  std::vector<MetricFamily> families = registry_->Collect();
  families.push_back(std::move(runs));
  for (PerRun& metric : per_run) families.push_back(std::move(metric.family));
  families.push_back(std::move(nodes));
  families.push_back(std::move(failures));
  return families;
}

}  // namespace ddprun
