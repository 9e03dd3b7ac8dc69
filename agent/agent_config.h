#pragma once
// What the launcher hands the agent: a validated description of one job on one node.

#include <signal.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/failure_summary.h"
#include "agent/health/health_check.h"
#include "agent/rule_options.h"
#include "node/cpu_binding.h"
#include "observability/elastic_record_log.h"
#include "rendezvous/backend_settings.h"
#include "rendezvous/rendezvous_settings.h"
#include "rendezvous/tls_config.h"

namespace ddprun {

/// Which of a worker's standard streams an -r/--redirects or -t/--tee setting selects.
enum StdStreams : int { kStdNone = 0, kStdOut = 1, kStdErr = 2, kStdBoth = 3 };

/// A torchrun std spec: one value for every local rank ("3") or a per-rank map ("0:1,1:2").
struct StdSpec {
  int all_ranks = kStdNone;
  std::map<int, int> per_rank;

  int ForRank(int local_rank) const {
    auto it = per_rank.find(local_rank);
    return it == per_rank.end() ? all_ranks : it->second;
  }
};

/// The signals an agent always forwards to its workers before stopping them;
/// --signals-to-handle adds to them.
inline const std::vector<int> kAlwaysHandledSignals = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};

struct AgentConfig {
  // What every node of the run shares (--nnodes, --max-restarts, the rendezvous timeouts,
  // --exit-barrier-timeout, node health): given to the rendezvous as it is.
  RendezvousSettings rendezvous;

  // Membership.
  int nproc_per_node = 1;
  int node_rank = 0;
  bool node_rank_given = false;  // --node-rank was set: a rank-order hint for c10d
  // The backend makes --node-rank this node's group rank (static), not a hint.
  bool fixed_node_rank = false;

  // Rendezvous.
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  std::string run_id = "none";
  std::map<std::string, std::string> rdzv_conf;  // as given; the parsed values follow
  absl::Duration close_timeout = absl::Seconds(30);
  // How long an agent waits for the master to answer one keep-alive ping before it takes
  // the master for lost (torchrun: the deadline of one keep-alive operation).
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  // How long this node's workers run on in their round without a rendezvous master (it
  // restarted, or cannot be reached) before they are stopped.
  absl::Duration master_outage_timeout = absl::Minutes(5);
  // How long a blocking Store read without its own timeout waits on a master this agent
  // hosts (torchrun: the c10d store's timeout).
  absl::Duration read_timeout = absl::Seconds(60);
  // The backend's own settings (its --rdzv-conf keys, its reading of --rdzv-endpoint), for
  // its network half; none when it has none.
  std::shared_ptr<BackendSettings> backend;
  TlsConfig tls;  // --rdzv-conf tls_cert, tls_key, tls_ca: to the master, and as a hosting master
  std::optional<bool> is_host;  // unset: inferred from --rdzv-endpoint
  std::string token;            // from token_file= or DDPRUN_RDZV_TOKEN; empty: none
  std::string endpoint_host;    // --rdzv-endpoint (c10d) or --master-addr (static)
  int endpoint_port = 29400;
  bool standalone = false;
  std::string master_addr = "127.0.0.1";
  std::optional<int> master_port;
  std::string local_addr;  // empty: this host's name

  // Workers.
  std::string role = "default";
  /// The full command of one worker: interpreter and flags, script, its arguments.
  /// `${local_rank}` is substituted per worker.
  std::vector<std::string> worker_argv;
  /// --preload: the modules the warm pool's interpreter imports, which every worker is then
  /// forked from (agent/process/warm_pool.h); empty: workers are started.
  std::vector<std::string> preload;
  /// The name the failure summary uses ("train.py FAILED").
  std::string entrypoint_name;
  /// Python workers: the interpreter that runs them, named in the failure summary.
  WorkerInterpreter interpreter;
  // --virtual-local-rank: every worker gets LOCAL_RANK=0 and sees only its own accelerator:
  // `device_variable` (CUDA_VISIBLE_DEVICES, ...) set to its entry of `device_values`, which
  // the launcher fills in from the node's accelerators (one per local rank).
  bool virtual_local_rank = false;
  std::string device_variable;
  std::vector<std::string> device_values;
  // --numa-binding / --cpu-affinity: as asked, and each local rank's binding as the launcher
  // planned it on this machine (empty: unbound).
  CpuBindingSettings cpu_binding;
  std::vector<WorkerBinding> worker_bindings;

  // Output.
  std::string log_dir;  // empty: a private temporary folder, removed when nothing in it is kept
  StdSpec redirects;    // already includes the tee bits, as torchrun does
  StdSpec tee;
  std::optional<std::set<int>> local_ranks_filter;  // unset: every rank reaches the console
  // --log-line-prefix-template (TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE); empty: "[<role><lr>]:".
  std::string log_line_prefix_template;
  // --duplicate-stdout-filters / --duplicate-stderr-filters: tee'd lines holding any of these
  // are also written to the attempt's filtered_stdout.log / filtered_stderr.log.
  std::vector<std::string> duplicate_stdout_filters, duplicate_stderr_filters;

  // Shutdown.
  // Signal numbers, in the order given; the launcher starts from kAlwaysHandledSignals.
  std::vector<int> signals_to_handle;
  // --shutdown-timeout, --kill-timeout: what the agent's rules read as it is.
  RuleOptions rules;
  // --worker-heartbeat-timeout: a worker that has not written to its DDPRUN_HEARTBEAT_FD for
  // this long is taken for hung and killed, which fails the attempt. Zero: off.
  absl::Duration worker_heartbeat_timeout = absl::ZeroDuration();
  // --worker-heartbeat-startup-timeout: until its first heartbeat, a worker gets this long
  // from its start instead (imports hold the GIL: a Python thread cannot beat meanwhile).
  // Zero: no bound before the first heartbeat.
  absl::Duration worker_heartbeat_startup_timeout = absl::Seconds(600);
  // TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT: a worker with a task in uninterruptible sleep
  // this long makes the node unhealthy: its part of the job stops, no restart spent. Zero: off.
  absl::Duration uninterruptible_timeout = absl::ZeroDuration();
  // Workers run Python (not --no-python): they get PYTHONFAULTHANDLER=1 unless it is set.
  bool python_workers = false;

  // Node health (docs/node-health.md): this node's checks before each join (when the
  // rendezvous keeps nodes out is in `rendezvous.node_health`).
  HealthCheckSettings health_check;

  // --event-log-handler: where torchelastic's events go (observability/elastic_record_log.h).
  RecordLogSettings event_log;
  // --metrics-port: serve Prometheus metrics (and, on the node hosting the master, the
  // status page) on this port; 0: any free port; unset: off (docs/observability.md).
  std::optional<int> metrics_port;
};

}  // namespace ddprun
