#include "launcher/options.h"

#include <signal.h>

#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/process/warm_pool.h"
#include "common/process_status.h"
#include "common/status_macros.h"
#include "launcher/backends.h"
#include "launcher/rdzv_conf_keys.h"

namespace ddprun {
namespace {

constexpr char kRdzvGroup[] = "Rendezvous";
constexpr char kLaunchGroup[] = "User-code launch";
constexpr char kShutdownGroup[] = "Shutdown and signals";
constexpr char kStaticGroup[] = "Node rank, master address and port";

absl::Status Nnodes(const std::string& value, ParseState& s) {
  DDPRUN_ASSIGN_OR_RETURN(NodeRange nodes, ParseNnodes(value));
  s.config.rendezvous.min_nodes = nodes.min_nodes;
  s.config.rendezvous.max_nodes = nodes.max_nodes;
  return absl::OkStatus();
}

absl::Status NprocPerNode(const std::string& value, ParseState& s) {
  DDPRUN_ASSIGN_OR_RETURN(s.config.nproc_per_node, ParseNprocPerNode(value, s.devices));
  return absl::OkStatus();
}

absl::Status MaxRestarts(const std::string& value, ParseState& s) {
  DDPRUN_ASSIGN_OR_RETURN(s.config.rendezvous.max_restarts,
                          ParseNonNegativeInt("--max-restarts", value));
  return absl::OkStatus();
}

absl::Status MonitorInterval(const std::string& value, ParseState&) {
  return ParseSeconds("--monitor-interval", value, /*positive=*/true).status();
}

absl::Status StartMethod(const std::string& value, ParseState& s) {
  if (value != "spawn" && value != "fork" && value != "forkserver") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--start-method='", value, "' is not valid: expected spawn, fork or forkserver"));
  }
  if (value != "spawn") {
    s.notices.push_back(absl::StrCat("--start-method=", value,
                                     " has no effect: ddprun starts "
                                     "every worker as a new process (clone+exec)"));
  }
  return absl::OkStatus();
}

absl::Status Role(const std::string& value, ParseState& s) {
  if (value.empty()) return absl::InvalidArgumentError("--role='' is not valid: expected a name");
  s.config.role = value;
  return absl::OkStatus();
}

absl::Status RdzvBackend(const std::string& value, ParseState& s) {
  if (FindRendezvousBackend(value) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv-backend='", value, "' is not valid: expected ", RendezvousBackendChoices()));
  }
  s.config.rdzv_backend = value;
  return absl::OkStatus();
}

absl::Status RdzvEndpoint(const std::string& value, ParseState& s) {
  s.config.rdzv_endpoint = value;
  // Several hosts, or URLs: an elected backend's store members, which that backend reads.
  if (value.empty() || value.find(',') != std::string::npos ||
      value.find("://") != std::string::npos) {
    return absl::OkStatus();
  }
  // c10d's default port, as torchrun; for static the port comes from --master-port.
  DDPRUN_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(value, AgentConfig().endpoint_port));
  s.config.endpoint_host = endpoint.host;
  s.config.endpoint_port = endpoint.port;
  return absl::OkStatus();
}

absl::Status RdzvId(const std::string& value, ParseState& s) {
  s.config.run_id = value;
  return absl::OkStatus();
}

// "join_timeout=", ...: what the shell completes after --rdzv-conf.
std::vector<std::string> RdzvConfCompletions() {
  std::vector<std::string> words;
  for (const RdzvConfKey& key : RdzvConfKeys()) {
    if (!key.torchrun_only) words.push_back(key.name + "=");
  }
  return words;
}

absl::Status RdzvConf(const std::string& value, ParseState& s) {
  DDPRUN_ASSIGN_OR_RETURN(auto conf, ParseRdzvConf(value));
  s.config.rdzv_conf = conf;
  // --rdzv-backend is parsed before: its own keys are known.
  const RendezvousBackend* backend = FindRendezvousBackend(s.config.rdzv_backend);
  return ApplyRdzvConf(s.config.rdzv_conf, s.config,
                       backend != nullptr ? backend->rdzv_conf_keys : std::vector<RdzvConfKey>{},
                       &s.notices);
}

absl::Status Standalone(const std::string& value, ParseState& s) {
  s.config.standalone = !value.empty();
  return absl::OkStatus();
}

absl::Status LogDir(const std::string& value, ParseState& s) {
  s.config.log_dir = value;
  return absl::OkStatus();
}

absl::Status StdStreamsFor(const std::string& option, const std::string& value, ParseState& s,
                           StdSpec& out) {
  DDPRUN_ASSIGN_OR_RETURN(StdSpec spec, ParseStdSpec(option, value));
  for (const auto& [rank, streams] : spec.per_rank) {
    if (rank >= s.config.nproc_per_node) {
      return absl::InvalidArgumentError(
          absl::StrCat(option, " names local rank ", rank, " but there are only ",
                       s.config.nproc_per_node, " (--nproc-per-node)"));
    }
  }
  out = spec;
  return absl::OkStatus();
}

absl::Status Redirects(const std::string& value, ParseState& s) {
  return StdStreamsFor("--redirects", value, s, s.config.redirects);
}

absl::Status Tee(const std::string& value, ParseState& s) {
  return StdStreamsFor("--tee", value, s, s.config.tee);
}

absl::Status LocalRanksFilter(const std::string& value, ParseState& s) {
  if (value.empty()) return absl::OkStatus();
  DDPRUN_ASSIGN_OR_RETURN(std::set<int> filter,
                          ParseLocalRanksFilter(value, s.config.nproc_per_node));
  s.config.local_ranks_filter = filter;
  return absl::OkStatus();
}

absl::Status SignalsToHandle(const std::string& value, ParseState& s) {
  DDPRUN_ASSIGN_OR_RETURN(std::vector<int> signals, ParseSignalList(value));
  // SIGTERM, SIGINT, SIGHUP and SIGQUIT are always handled, and the list adds to them:
  // "--signals-to-handle=SIGUSR1" for Slurm preemption must not turn a plain SIGTERM into
  // an agent dying without a grace period for its workers.
  std::vector<int>& handled = s.config.signals_to_handle;
  handled = kAlwaysHandledSignals;
  for (int sig : signals) {
    if (std::find(handled.begin(), handled.end(), sig) == handled.end()) handled.push_back(sig);
  }
  return absl::OkStatus();
}

absl::Status ShutdownTimeout(const std::string& value, ParseState& s) {
  return SecondsInto("--shutdown-timeout", value, s.config.rules.shutdown_timeout);
}

absl::Status ExitBarrierTimeout(const std::string& value, ParseState& s) {
  return SecondsInto("--exit-barrier-timeout", value, s.config.rendezvous.exit_barrier_timeout);
}

absl::Status NodeRank(const std::string& value, ParseState& s) {
  DDPRUN_ASSIGN_OR_RETURN(s.config.node_rank, ParseNonNegativeInt("--node-rank", value));
  return absl::OkStatus();
}

absl::Status MasterPort(const std::string& value, ParseState& s) {
  if (value.empty()) return absl::OkStatus();
  absl::StatusOr<int> port = ParseNonNegativeInt("--master-port", value);
  if (!port.ok() || *port < 1 || *port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--master-port='", value, "' is not valid: expected a TCP port 1-65535"));
  }
  s.config.master_port = *port;
  return absl::OkStatus();
}

absl::Status Preload(const std::string& value, ParseState& s) {
  if (value.empty()) return absl::OkStatus();
  DDPRUN_ASSIGN_OR_RETURN(s.config.preload, ParsePreload(value));
  // torch and numpy read no rank at import; a module of the user's own may.
  std::vector<std::string> others;
  for (const std::string& module : s.config.preload) {
    const std::string top = module.substr(0, module.find('.'));
    if (top != "torch" && top != "numpy") others.push_back(module);
  }
  if (!others.empty()) {
    s.notices.push_back(absl::StrCat(
        "--preload: ", absl::StrJoin(others, ", "),
        " is imported once per node, with the node's environment, not a rank's: what it reads "
        "at import (RANK, LOCAL_RANK, CUDA_VISIBLE_DEVICES) is the agent's, in every worker"));
  }
  return absl::OkStatus();
}

absl::Status LocalAddr(const std::string& value, ParseState& s) {
  s.config.local_addr = value;
  return absl::OkStatus();
}

// The table, one Option(...) per option (options.h says what an entry may say).
// Every default that lands in the config is the config's own (agent/agent_config.h and the
// settings it holds), written as the option's parser reads it: declared once.
std::vector<OptionSpec> MakeOptions() {
  const std::vector<std::string> std_streams = {"0", "1", "2", "3"};
  const AgentConfig defaults;
  return {
      Option("--nnodes", Nnodes)
          .In(kWorkerGroup)
          .NoUnderscore()
          .Default(absl::StrCat(defaults.rendezvous.min_nodes, ":", defaults.rendezvous.max_nodes))
          .Help("Number of nodes, or MIN:MAX for an elastic job"),
      Option("--nproc-per-node", NprocPerNode)
          .In(kWorkerGroup)
          .Default(absl::StrCat(defaults.nproc_per_node))
          .Completes({"gpu", "cpu", "auto", "xpu"})
          .Help("Workers per node: a number (at most 4096), 'gpu' (one per visible NVIDIA, AMD or "
                "Intel GPU), 'xpu' (Intel GPUs), 'cpu' (one per CPU) or 'auto' (GPUs if any, else "
                "CPUs)"),
      Option("--max-restarts", MaxRestarts)
          .In(kWorkerGroup)
          .Default(absl::StrCat(defaults.rendezvous.max_restarts))
          .Help("Times the whole job is restarted after a worker fails"),
      Option("--monitor-interval", MonitorInterval)
          .In(kWorkerGroup)
          .Default("0.1")
          .Help("Accepted for torchrun compatibility; ddprun sees a worker exit at once instead of "
                "polling"),
      Option("--start-method", StartMethod)
          .In(kWorkerGroup)
          .Default("spawn")
          .Completes({"spawn", "fork", "forkserver"})
          .Help("Accepted for torchrun compatibility (spawn, fork, forkserver); it has no effect: "
                "every worker is a new process started with clone+exec"),
      Option("--role", Role)
          .In(kWorkerGroup)
          .NoUnderscore()
          .Default(defaults.role)
          .Help("Worker role: ROLE_NAME and the tee prefix [<role><local_rank>]:"),

      Option("--rdzv-backend", RdzvBackend)
          .In(kRdzvGroup)
          .Default(defaults.rdzv_backend)
          .Completes(RendezvousBackendNames())
          .Help("Rendezvous backend: " + RendezvousBackendChoices("or")),
      Option("--rdzv-endpoint", RdzvEndpoint)
          .In(kRdzvGroup)
          .Help(absl::StrCat("Rendezvous master as HOST[:PORT] (c10d default port ",
                             defaults.endpoint_port,
                             "); with an elected backend, its store's members, HOST[:PORT],...")),
      Option("--rdzv-id", RdzvId)
          .In(kRdzvGroup)
          .Default(defaults.run_id)
          .Help("Job id shared by all nodes (TORCHELASTIC_RUN_ID); unset in a Slurm job: "
                "$SLURM_JOB_ID"),
      Option("--rdzv-conf", RdzvConf)
          .In(kRdzvGroup)
          .Completes(RdzvConfCompletions())
          .Help("Rendezvous settings as key=value,... (the keys: end of --help-all)"),
      Option("--standalone", Standalone)
          .In(kRdzvGroup)
          .NoUnderscore()
          .Flag()
          .Help("One-node job: rendezvous in-process and a random run id (instead of --rdzv-id "
                "and --rdzv-endpoint)"),

      Option("--module")
          .In(kLaunchGroup)
          .Short("-m")
          .NoUnderscore()
          .Flag()
          .Help("Run the script as a Python module: python -u -m <script>"),
      Option("--no-python")
          .In(kLaunchGroup)
          .Flag()
          .Help("Execute <script> directly instead of with python -u"),
      Option("--preload", Preload)
          .In(kLaunchGroup)
          .Completes({"auto", "torch", "torch,numpy"})
          .Help("Python modules imported once per node (auto: torch); each worker, at every "
                "start and restart, is forked from that interpreter with them already "
                "imported, instead of importing them again (docs/warm-restart.md; ddprun "
                "only)"),
      Option("--run-path")
          .In(kLaunchGroup)
          .Flag()
          .Help("Run <script> as a Python file path (ddprun always runs workers as separate "
                "processes)"),

      Option("--log-dir", LogDir)
          .In(kLogGroup)
          .Completes({"<dirs>"})
          .Help("Folder for <run_id>/attempt_<n>/<local_rank>/{stdout,stderr}.log and error.json; "
                "unset: a temporary folder, removed unless it holds logs or error files"),
      Option("--redirects", Redirects)
          .In(kLogGroup)
          .Short("-r")
          .Default(absl::StrCat(defaults.redirects.all_ranks))
          .Completes(std_streams)
          .Help("Write worker streams to files instead of the console: 0 none, 1 stdout, 2 stderr, "
                "3 both, or per local rank as 0:1,1:2"),
      Option("--tee", Tee)
          .In(kLogGroup)
          .Short("-t")
          .Default(absl::StrCat(defaults.tee.all_ranks))
          .Completes(std_streams)
          .Help("Like --redirects, and also show them on the console with a [<role><local_rank>]: "
                "prefix"),
      Option("--local-ranks-filter", LocalRanksFilter)
          .In(kLogGroup)
          .Help("Only these local ranks (e.g. 0,2) reach the console; the others still get their "
                "log files"),

      Option("--signals-to-handle", SignalsToHandle)
          .In(kShutdownGroup)
          .Default(SignalNames(kAlwaysHandledSignals))
          .TorchEnv("TORCHELASTIC_SIGNALS_TO_HANDLE")
          .Help("Signals the agent forwards to every worker before stopping them; SIGTERM, SIGINT, "
                "SIGHUP and SIGQUIT always are, and the list adds to them (e.g. SIGUSR1,SIGUSR2)"),
      Option("--shutdown-timeout", ShutdownTimeout)
          .In(kShutdownGroup)
          .Default(SecondsText(defaults.rules.shutdown_timeout))
          .TorchEnv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT")
          .Help("Seconds between the stop signal and SIGKILL"),
      Option("--exit-barrier-timeout", ExitBarrierTimeout)
          .In(kShutdownGroup)
          .Default(SecondsText(defaults.rendezvous.exit_barrier_timeout))
          .TorchEnv("TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT")
          .Help("Seconds a node that finished waits for the others (multi-node)"),
      Option("--node-rank", NodeRank)
          .In(kStaticGroup)
          .Default(absl::StrCat(defaults.node_rank))
          .Help("This node's rank with the static backend; with c10d, a hint for the order of "
                "new nodes"),
      Option("--master-addr")
          .In(kStaticGroup)
          .Help("MASTER_ADDR for the workers. One node: unset, --local-addr, else localhost. "
                "Static backend: node 0's address, where its agent serves the rendezvous master "
                "and the workers' TCPStore"),
      Option("--master-port", MasterPort)
          .In(kStaticGroup)
          .Help("One node: MASTER_PORT for the workers (unset: a free port, new on every attempt). "
                "Static backend: node 0's port for the rendezvous master and the workers' store "
                "(their MASTER_PORT). c10d: the port of each other agent's store for its workers"),
      Option("--local-addr", LocalAddr)
          .In(kStaticGroup)
          .Help("This node's address as other nodes reach it (c10d: MASTER_ADDR when it is rank 0, "
                "unless the endpoint is on this machine; unset: where the master sees it connect "
                "from)"),
  };
}

}  // namespace

absl::Status SecondsInto(const std::string& option, const std::string& value, absl::Duration& out,
                         bool positive) {
  DDPRUN_ASSIGN_OR_RETURN(out, ParseSeconds(option, value, positive));
  return absl::OkStatus();
}

const std::vector<OptionSpec>& Options() {
  static const auto* options = new std::vector<OptionSpec>(WithObservabilityOptions(
      WithNodeHealthOptions(WithHangOptions(WithPlacementOptions(WithLogOptions(MakeOptions()))))));
  return *options;
}

std::string PetName(const std::string& name) {
  std::string pet = "PET_";
  for (size_t i = 2; i < name.size(); ++i) {
    pet += name[i] == '-' ? '_' : static_cast<char>(std::toupper(name[i]));
  }
  return pet;
}

}  // namespace ddprun
