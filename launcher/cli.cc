#include "launcher/cli.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "CLI/CLI.hpp"
#include "agent/host_info.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ddprun {
namespace {

constexpr char kWorkerGroup[] = "Worker/resource definitions";
constexpr char kRdzvGroup[] = "Rendezvous";
constexpr char kLaunchGroup[] = "User-code launch";
constexpr char kLogGroup[] = "Logs";
constexpr char kShutdownGroup[] = "Shutdown and signals";
constexpr char kStaticGroup[] = "Node rank, master address and port";

// Every option's raw text. Values are parsed by cli_values.h, so messages are ours.
struct RawOptions {
  std::string nnodes = "1:1";
  std::string nproc_per_node = "1";
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  std::string rdzv_id = "none";
  std::string rdzv_conf;
  bool standalone = false;
  std::string max_restarts = "0";
  std::string monitor_interval = "0.1";
  std::string start_method = "spawn";
  std::string role = "default";
  bool module = false;
  bool no_python = false;
  bool run_path = false;
  std::string log_dir;
  std::string redirects = "0";
  std::string tee = "0";
  std::string local_ranks_filter;
  std::string node_rank = "0";
  bool node_rank_given = false;  // on the command line or in PET_NODE_RANK
  bool rdzv_id_given = false;    // on the command line or in PET_RDZV_ID
  std::string master_addr;
  std::string master_port;
  std::string local_addr;
  std::string signals_to_handle = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
  std::string shutdown_timeout = "30";
  std::string exit_barrier_timeout = "300";
  std::string worker_heartbeat_timeout = "0";
};

// "--nproc-per-node" -> "--nproc-per-node,--nproc_per_node" and PET_NPROC_PER_NODE.
std::string Spellings(const std::string& dashed, bool underscore_too) {
  std::string names = dashed;
  if (underscore_too) {
    std::string underscored = dashed;
    for (size_t i = 2; i < underscored.size(); ++i) {
      if (underscored[i] == '-') underscored[i] = '_';
    }
    if (underscored != dashed) absl::StrAppend(&names, ",", underscored);
  }
  return names;
}

std::string PetName(const std::string& dashed) {
  std::string name = "PET_";
  for (size_t i = 2; i < dashed.size(); ++i) {
    name += dashed[i] == '-' ? '_' : static_cast<char>(std::toupper(dashed[i]));
  }
  return name;
}

CLI::Option* AddText(CLI::App& app, const std::string& short_name, const std::string& dashed,
                     std::string& value, const std::string& help, const char* group,
                     bool underscore_too = true) {
  std::string names = Spellings(dashed, underscore_too);
  if (!short_name.empty()) names = short_name + "," + names;
  const std::string shown_default = value.empty() ? "unset" : "'" + value + "'";
  return app.add_option(names, value, absl::StrCat(help, " [default: ", shown_default, "]"))
      ->envname(PetName(dashed))
      ->type_name("")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)  // as argparse: the last one wins
      ->group(group);
}

CLI::Option* AddFlag(CLI::App& app, const std::string& short_name, const std::string& dashed,
                     bool& value, const std::string& help, const char* group,
                     bool underscore_too = true) {
  std::string names = Spellings(dashed, underscore_too);
  if (!short_name.empty()) names = short_name + "," + names;
  return app.add_flag(names, value, help)
      ->envname(PetName(dashed))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->group(group);
}

void DeclareOptions(CLI::App& app, RawOptions& o) {
  AddText(app, "", "--nnodes", o.nnodes,
          "Number of nodes, or MIN:MAX for an elastic job", kWorkerGroup, false);
  AddText(app, "", "--nproc-per-node", o.nproc_per_node,
          "Workers per node: a number, 'gpu' (one per visible GPU), 'cpu' (one per CPU) or "
          "'auto' (GPUs if any, else CPUs)", kWorkerGroup);
  AddText(app, "", "--max-restarts", o.max_restarts,
          "Times the whole job is restarted after a worker fails", kWorkerGroup);
  AddText(app, "", "--monitor-interval", o.monitor_interval,
          "Accepted for torchrun compatibility; ddprun sees a worker exit at once instead of "
          "polling", kWorkerGroup);
  AddText(app, "", "--start-method", o.start_method,
          "Accepted for torchrun compatibility (spawn, fork, forkserver); it has no effect: "
          "every worker is a new process started with clone+exec", kWorkerGroup);
  AddText(app, "", "--role", o.role, "Worker role: ROLE_NAME and the tee prefix [<role><local_rank>]:",
          kWorkerGroup, false);

  AddText(app, "", "--rdzv-backend", o.rdzv_backend, "Rendezvous backend: c10d or static",
          kRdzvGroup);
  AddText(app, "", "--rdzv-endpoint", o.rdzv_endpoint,
          "Rendezvous master as HOST[:PORT] (c10d default port 29400)", kRdzvGroup);
  AddText(app, "", "--rdzv-id", o.rdzv_id,
          "Job id shared by all nodes (TORCHELASTIC_RUN_ID); unset in a Slurm job: "
          "$SLURM_JOB_ID",
          kRdzvGroup);
  AddText(app, "", "--rdzv-conf", o.rdzv_conf,
          "Rendezvous settings as key=value,... (join_timeout, last_call_timeout, ...)",
          kRdzvGroup);
  AddFlag(app, "", "--standalone", o.standalone,
          "One-node job: rendezvous in-process and a random run id (instead of --rdzv-id "
          "and --rdzv-endpoint) [default: off]", kRdzvGroup, false);

  AddFlag(app, "-m", "--module", o.module,
          "Run the script as a Python module: python -u -m <script> [default: off]",
          kLaunchGroup, false);
  AddFlag(app, "", "--no-python", o.no_python,
          "Execute <script> directly instead of with python -u [default: off]", kLaunchGroup);
  AddFlag(app, "", "--run-path", o.run_path,
          "Run <script> as a Python file path (ddprun always runs workers as separate "
          "processes) [default: off]", kLaunchGroup);

  AddText(app, "", "--log-dir", o.log_dir,
          "Folder for <run_id>/attempt_<n>/<local_rank>/{stdout,stderr}.log and error.json; "
          "unset: a temporary folder, removed unless it holds logs or error files",
          kLogGroup);
  AddText(app, "-r", "--redirects", o.redirects,
          "Write worker streams to files instead of the console: 0 none, 1 stdout, 2 stderr, "
          "3 both, or per local rank as 0:1,1:2", kLogGroup);
  AddText(app, "-t", "--tee", o.tee,
          "Like --redirects, and also show them on the console with a [<role><local_rank>]: "
          "prefix", kLogGroup);
  AddText(app, "", "--local-ranks-filter", o.local_ranks_filter,
          "Only these local ranks (e.g. 0,2) reach the console; the others still get their "
          "log files", kLogGroup);

  AddText(app, "", "--signals-to-handle", o.signals_to_handle,
          "Signals the agent forwards to every worker before stopping them; SIGTERM, SIGINT, "
          "SIGHUP and SIGQUIT always are, and the list adds to them (e.g. SIGUSR1,SIGUSR2)",
          kShutdownGroup);
  AddText(app, "", "--shutdown-timeout", o.shutdown_timeout,
          "Seconds between the stop signal and SIGKILL", kShutdownGroup);
  AddText(app, "", "--exit-barrier-timeout", o.exit_barrier_timeout,
          "Seconds a node that finished waits for the others (multi-node)", kShutdownGroup);
  AddText(app, "", "--worker-heartbeat-timeout", o.worker_heartbeat_timeout,
          "Seconds a worker may go without writing to the pipe in DDPRUN_HEARTBEAT_FD before "
          "it is taken for hung, killed and the attempt fails; 0: off (ddprun only)",
          kShutdownGroup);

  AddText(app, "", "--node-rank", o.node_rank,
          "This node's rank with the static backend; with c10d, a hint for the order of "
          "new nodes", 
          kStaticGroup);
  AddText(app, "", "--master-addr", o.master_addr,
          "MASTER_ADDR for the workers. One node: unset, --local-addr, else localhost. "
          "Static backend: node 0's address, where its agent serves the rendezvous master "
          "and the workers' TCPStore",
          kStaticGroup);
  AddText(app, "", "--master-port", o.master_port,
          "One node: MASTER_PORT for the workers (unset: a free port, new on every attempt). "
          "Static backend: node 0's port for the rendezvous master and the workers' store "
          "(their MASTER_PORT). c10d: the port of each other agent's store for its workers",
          kStaticGroup);
  AddText(app, "", "--local-addr", o.local_addr,
          "This node's address as other nodes reach it (c10d: MASTER_ADDR when it is rank 0, "
          "unless the endpoint is on this machine; unset: where the master sees it connect from)",
          kStaticGroup);
}

constexpr char kFooter[] = R"(Positional:
  training_script [args...]  The script (python -u <script>), module (-m) or program
                             (--no-python), then its arguments, passed through verbatim;
                             ${local_rank} in them becomes each worker's local rank.

Environment:
  PET_<OPTION>   default for each option above, e.g. PET_NPROC_PER_NODE=4
  PYTHON_EXEC    interpreter for Python workers [default: python3 from PATH]
  SLURM_JOB_ID   the run id when neither --rdzv-id nor PET_RDZV_ID is given
  LOGLEVEL       ddprun's own messages: DEBUG, INFO, WARNING (default), ERROR, CRITICAL
  TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE  tee prefix, with ${role_name} ${rank} ${local_rank}

Exit status:
  0        every worker succeeded
  N        the root-cause worker's exit code (128+S if it died of signal S)
  128+S    ddprun received signal S and stopped the workers
  2        bad command line or environment: nothing was started
  70       ddprun could not set the job up (event loop, signals, log folder, port)
  75       the rendezvous failed: timed out, refused this node (token, run id,
           settings), or the master was unreachable within join_timeout
)";

std::string MakeRunId() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  const uint64_t hi = gen(), lo = gen();
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-4%03x-%04x-%012llx",
                static_cast<unsigned>(hi >> 32), static_cast<unsigned>((hi >> 16) & 0xffff),
                static_cast<unsigned>(hi & 0xfff),
                static_cast<unsigned>(0x8000 | ((lo >> 48) & 0x3fff)),
                static_cast<unsigned long long>(lo & 0xffffffffffffULL));
  return buf;
}

// The executable path for `name`: as given when it has a '/', else searched in PATH.
absl::StatusOr<std::string> FindExecutable(const std::string& name) {
  auto executable_file = [](const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    struct stat st;
    if (::stat(name.c_str(), &st) != 0) return absl::NotFoundError("does not exist");
    if (!S_ISREG(st.st_mode)) return absl::FailedPreconditionError("is not a regular file");
    if (::access(name.c_str(), X_OK) != 0) {
      return absl::PermissionDeniedError("is not executable (chmod +x it)");
    }
    return name;
  }
  const char* path_env = ::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path_env ? path_env : "", ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (executable_file(candidate)) return candidate;
  }
  return absl::NotFoundError("was not found on PATH");
}

absl::Status BuildWorkerCommand(const RawOptions& o, const std::vector<std::string>& positional,
                                AgentConfig& config) {
  const std::string& script = positional[0];
  if (o.module && o.no_python) {
    return absl::InvalidArgumentError(
        "-m/--module and --no-python cannot be used together: a module needs Python");
  }
  if (o.no_python) {
    absl::StatusOr<std::string> program = FindExecutable(script);
    if (!program.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "training_script '", script, "' (with --no-python) ", program.status().message()));
    }
    config.worker_argv = positional;
  } else {
    const char* python_exec = ::getenv("PYTHON_EXEC");
    const std::string python = python_exec != nullptr && *python_exec ? python_exec : "python3";
    absl::StatusOr<std::string> interpreter = FindExecutable(python);
    if (!interpreter.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the Python interpreter '", python, "' ", interpreter.status().message(),
          "; set PYTHON_EXEC to one, or use --no-python to run a program directly"));
    }
    if (!o.module) {
      struct stat st;
      if (::stat(script.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "training_script '", script, "' is not a file; give a Python script, "
            "-m for a module, or --no-python for a program"));
      }
    }
    config.worker_argv = {python, "-u"};
    if (o.module) config.worker_argv.push_back("-m");
    config.worker_argv.insert(config.worker_argv.end(), positional.begin(), positional.end());
  }
  config.entrypoint_name = script;
  return absl::OkStatus();
}

absl::Status FillConfig(const RawOptions& o, const DeviceCounts& devices, AgentConfig& config,
                        std::vector<std::string>& notices) {
  absl::StatusOr<NodeRange> nodes = ParseNnodes(o.nnodes);
  if (!nodes.ok()) return nodes.status();
  config.min_nodes = nodes->min_nodes;
  config.max_nodes = nodes->max_nodes;

  absl::StatusOr<int> nproc = ParseNprocPerNode(o.nproc_per_node, devices);
  if (!nproc.ok()) return nproc.status();
  config.nproc_per_node = *nproc;

  absl::StatusOr<int> max_restarts = ParseNonNegativeInt("--max-restarts", o.max_restarts);
  if (!max_restarts.ok()) return max_restarts.status();
  config.max_restarts = *max_restarts;

  if (absl::StatusOr<absl::Duration> d = ParseSeconds("--monitor-interval", o.monitor_interval,
                                                      /*positive=*/true);
      !d.ok()) {
    return d.status();
  }
  if (o.start_method != "spawn" && o.start_method != "fork" && o.start_method != "forkserver") {
    return absl::InvalidArgumentError(absl::StrCat("--start-method='", o.start_method,
                                                   "' is not valid: expected spawn, fork or forkserver"));
  }
  if (o.start_method != "spawn") {
    notices.push_back(absl::StrCat("--start-method=", o.start_method,
                                   " has no effect: ddprun starts every worker as a new process (clone+exec)"));
  }
  if (o.role.empty()) return absl::InvalidArgumentError("--role='' is not valid: expected a name");
  config.role = o.role;

  if (o.rdzv_backend != "c10d" && o.rdzv_backend != "static") {
    return absl::InvalidArgumentError(
        absl::StrCat("--rdzv-backend='", o.rdzv_backend, "' is not valid: expected c10d or static"));
  }
  config.rdzv_backend = o.rdzv_backend;
  config.rdzv_endpoint = o.rdzv_endpoint;
  if (!o.rdzv_endpoint.empty()) {
    // c10d's default port, as torchrun; for static the port comes from --master-port.
    absl::StatusOr<Endpoint> endpoint = ParseEndpoint(o.rdzv_endpoint, 29400);
    if (!endpoint.ok()) return endpoint.status();
    config.endpoint_host = endpoint->host;
    config.endpoint_port = endpoint->port;
  }
  config.run_id = o.rdzv_id;
  // In a Slurm job every node sees the same SLURM_JOB_ID, and a requeued job keeps it: the
  // id a job script would pass anyway.
  if (const char* job = ::getenv("SLURM_JOB_ID"); !o.rdzv_id_given && job != nullptr && *job) {
    config.run_id = job;
  }
  absl::StatusOr<std::map<std::string, std::string>> conf = ParseRdzvConf(o.rdzv_conf);
  if (!conf.ok()) return conf.status();
  config.rdzv_conf = *conf;
  if (absl::Status s = ApplyRdzvConf(config.rdzv_conf, config); !s.ok()) return s;
  if (config.token.empty()) {
    if (const char* token = ::getenv("DDPRUN_RDZV_TOKEN"); token != nullptr) {
      config.token = std::string(absl::StripAsciiWhitespace(token));  // as token files are
    }
  }
  config.standalone = o.standalone;
  if (o.standalone) {
    config.rdzv_backend = "c10d";
    config.rdzv_endpoint = "localhost:0";
    config.run_id = MakeRunId();
  }
  // 256 bytes: the most a rendezvous master takes (CheckLimits); better said here than late.
  if (config.run_id.empty() || config.run_id.find('/') != std::string::npos ||
      config.run_id.size() > 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rdzv-id='", config.run_id.substr(0, 300), "' is not valid: expected a non-empty id "
        "without '/', at most 256 bytes"));
  }

  absl::StatusOr<int> node_rank = ParseNonNegativeInt("--node-rank", o.node_rank);
  if (!node_rank.ok()) return node_rank.status();
  config.node_rank = *node_rank;
  config.node_rank_given = o.node_rank_given;
  if (!o.master_port.empty()) {
    absl::StatusOr<int> port = ParseNonNegativeInt("--master-port", o.master_port);
    if (!port.ok() || *port < 1 || *port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--master-port='", o.master_port, "' is not valid: expected a TCP port 1-65535"));
    }
    config.master_port = *port;
  }
  config.local_addr = o.local_addr;
  config.master_addr = !o.master_addr.empty() ? o.master_addr
                       : !o.local_addr.empty() ? o.local_addr
                                               : "localhost";

  config.log_dir = o.log_dir;
  if (!config.log_dir.empty() && config.log_dir.front() != '/') {
    // Workers get TORCHELASTIC_ERROR_FILE under it: it must stay valid if they chdir.
    char cwd[4096];
    if (::getcwd(cwd, sizeof(cwd)) != nullptr) config.log_dir = absl::StrCat(cwd, "/", config.log_dir);
  }
  absl::StatusOr<StdSpec> redirects = ParseStdSpec("--redirects", o.redirects);
  if (!redirects.ok()) return redirects.status();
  absl::StatusOr<StdSpec> tee = ParseStdSpec("--tee", o.tee);
  if (!tee.ok()) return tee.status();
  for (const StdSpec* spec : {&*redirects, &*tee}) {
    for (const auto& [rank, streams] : spec->per_rank) {
      if (rank >= config.nproc_per_node) {
        return absl::InvalidArgumentError(absl::StrCat(
            spec == &*tee ? "--tee" : "--redirects", " names local rank ", rank,
            " but there are only ", config.nproc_per_node, " (--nproc-per-node)"));
      }
    }
  }
  // Tee implies redirect, as torchrun ORs the tee bits into the redirects.
  config.tee = *tee;
  config.redirects.all_ranks = redirects->all_ranks | tee->all_ranks;
  for (const StdSpec* spec : {&*redirects, &*tee}) {
    for (const auto& [rank, streams] : spec->per_rank) {
      config.redirects.per_rank[rank] = redirects->ForRank(rank) | tee->ForRank(rank);
    }
  }
  if (!o.local_ranks_filter.empty()) {
    absl::StatusOr<std::set<int>> filter =
        ParseLocalRanksFilter(o.local_ranks_filter, config.nproc_per_node);
    if (!filter.ok()) return filter.status();
    config.local_ranks_filter = *filter;
  }

  absl::StatusOr<std::vector<int>> signals = ParseSignalList(o.signals_to_handle);
  if (!signals.ok()) return signals.status();
  // SIGTERM, SIGINT, SIGHUP and SIGQUIT are always handled, and the list adds to them:
  // "--signals-to-handle=SIGUSR1" for Slurm preemption must not turn a plain SIGTERM into
  // an agent dying without a grace period for its workers.
  config.signals_to_handle = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  for (int sig : *signals) {
    if (std::find(config.signals_to_handle.begin(), config.signals_to_handle.end(), sig) ==
        config.signals_to_handle.end()) {
      config.signals_to_handle.push_back(sig);
    }
  }
  absl::StatusOr<absl::Duration> shutdown = ParseSeconds("--shutdown-timeout", o.shutdown_timeout);
  if (!shutdown.ok()) return shutdown.status();
  config.shutdown_timeout = *shutdown;
  absl::StatusOr<absl::Duration> barrier =
      ParseSeconds("--exit-barrier-timeout", o.exit_barrier_timeout);
  if (!barrier.ok()) return barrier.status();
  config.exit_barrier_timeout = *barrier;
  absl::StatusOr<absl::Duration> heartbeat =
      ParseSeconds("--worker-heartbeat-timeout", o.worker_heartbeat_timeout);
  if (!heartbeat.ok()) return heartbeat.status();
  config.worker_heartbeat_timeout = *heartbeat;

  if (config.max_nodes > 1) {
    if (o.standalone) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--standalone is for one-node jobs, but --nnodes=", o.nnodes, ": give every node "
          "--rdzv-backend=c10d --rdzv-endpoint=HOST:PORT --rdzv-id=JOB instead"));
    }
    if (config.rdzv_backend == "c10d" && o.rdzv_endpoint.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--nnodes=", o.nnodes, " with --rdzv-backend=c10d needs --rdzv-endpoint=HOST[:PORT]: "
          "the address of the node (or ddprun-master) that all nodes can reach"));
    }
    if (config.rdzv_backend == "static") {
      // The static backend's master is node 0, at --master-addr:--master-port.
      if (config.min_nodes != config.max_nodes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--nnodes=", o.nnodes, " with --rdzv-backend=static must be a fixed count: use "
            "--rdzv-backend=c10d for an elastic range"));
      }
      if (o.master_addr.empty() || !config.master_port) {
        return absl::InvalidArgumentError(
            "--rdzv-backend=static with several nodes needs --master-addr and --master-port: "
            "the address and port of node 0, where the rendezvous master runs");
      }
      if (config.node_rank >= config.max_nodes) {
        return absl::InvalidArgumentError(absl::StrCat("--node-rank=", config.node_rank,
                                                       " is not valid: expected 0 to ",
                                                       config.max_nodes - 1));
      }
      config.endpoint_host = o.master_addr;
      config.endpoint_port = *config.master_port;
      if (!config.is_host) config.is_host = config.node_rank == 0;
    }
    // The workers' MASTER_ADDR and MASTER_PORT are where group rank 0's agent serves their
    // TCPStore (docs/environment.md): static, --master-addr:--master-port; c10d, an address
    // of that node (--master-port, when given, is the port of every node's store).
  }
  return absl::OkStatus();
}

// Applies the defaults torchrun reads from its own variables when the option is not given.
void ApplyTorchEnvDefaults(RawOptions& o, const CLI::App& app) {
  if (app.get_option("--shutdown-timeout")->count() == 0) {
    if (const char* v = ::getenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT"); v && *v) o.shutdown_timeout = v;
  }
  if (app.get_option("--exit-barrier-timeout")->count() == 0) {
    if (const char* v = ::getenv("TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT"); v && *v) {
      o.exit_barrier_timeout = v;
    }
  }
  if (app.get_option("--signals-to-handle")->count() == 0) {
    if (const char* v = ::getenv("TORCHELASTIC_SIGNALS_TO_HANDLE"); v && *v) o.signals_to_handle = v;
  }
}

// CLI11 reads "--opt=" as "--opt" and then takes the next argument as the value; argparse
// (torchrun) gives the empty string. Such tokens are marked before parsing and unmarked after.
constexpr char kEmptyValueMark[] = "\x1f";

std::vector<std::string> MarkEmptyValues(const std::vector<std::string>& args) {
  std::vector<std::string> out = args;
  for (std::string& arg : out) {
    if (absl::StartsWith(arg, "--") && arg.size() > 3 && arg.back() == '=' &&
        arg.find('=') == arg.size() - 1) {
      arg += kEmptyValueMark;
    }
  }
  return out;
}

void UnmarkEmptyValue(std::string& value) {
  if (absl::EndsWith(value, kEmptyValueMark)) value.resize(value.size() - 1);
}

void UnmarkEmptyValues(RawOptions& o, std::vector<std::string>& positional) {
  for (std::string* field :
       {&o.nnodes, &o.nproc_per_node, &o.rdzv_backend, &o.rdzv_endpoint, &o.rdzv_id,
        &o.rdzv_conf, &o.max_restarts, &o.monitor_interval, &o.start_method, &o.role,
        &o.log_dir, &o.redirects, &o.tee, &o.local_ranks_filter, &o.node_rank, &o.master_addr,
        &o.master_port, &o.local_addr, &o.signals_to_handle, &o.shutdown_timeout,
        &o.exit_barrier_timeout, &o.worker_heartbeat_timeout}) {
    UnmarkEmptyValue(*field);
  }
  for (std::string& arg : positional) UnmarkEmptyValue(arg);  // script arguments, verbatim
}

// CLI11 says "--x: 1 required  missing"; say what to do instead.
std::string DescribeParseError(const CLI::ParseError& e) {
  const std::string what = e.what();
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    const std::string option = what.substr(0, what.find(':'));
    return absl::StrCat("option ", option, " needs a value, e.g. ", option,
                        "=VALUE; see ddprun --help");
  }
  return absl::StrCat(what, "; see ddprun --help");
}

class UsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override {
    return "Usage: ddprun [OPTIONS] training_script [args...]\n";
  }
};

}  // namespace

std::string VersionText() { return absl::StrCat("ddprun ", DDPRUN_VERSION); }

namespace {

// ddprun's command line: what --help shows, ParseCommandLine parses, and DescribeOptions
// hands to the man page and the completion.
void DeclareApp(CLI::App& app, RawOptions& raw) {
  app.formatter(std::make_shared<UsageFormatter>());
  app.prefix_command();
  app.set_version_flag("--version", VersionText(), "Print ddprun's version and exit");
  app.footer(kFooter);
  app.get_formatter()->column_width(34);
  DeclareOptions(app, raw);
}

}  // namespace

std::vector<OptionDoc> DescribeOptions() {
  CLI::App app("ddprun: a fast, torchrun-compatible launcher for distributed training.", "ddprun");
  RawOptions raw;
  DeclareApp(app, raw);
  std::vector<OptionDoc> docs;
  for (const CLI::Option* option : app.get_options()) {
    OptionDoc doc;
    for (const std::string& s : option->get_snames()) doc.names.push_back("-" + s);
    for (const std::string& l : option->get_lnames()) doc.names.push_back("--" + l);
    doc.env = option->get_envname();
    doc.help = option->get_description();
    doc.group = option->get_group();
    doc.takes_value = option->get_items_expected_min() > 0;  // 0 for flags
    docs.push_back(std::move(doc));
  }
  return docs;
}

std::string HelpFooter() { return kFooter; }

absl::StatusOr<CliOutcome> ParseCommandLine(const std::vector<std::string>& args,
                                            const DeviceCounts& devices) {
  CLI::App app("ddprun: a fast, torchrun-compatible launcher for distributed training.", "ddprun");
  RawOptions raw;
  DeclareApp(app, raw);

  const std::vector<std::string> marked = MarkEmptyValues(args);
  std::vector<std::string> reversed(marked.rbegin(), marked.rend());
  CliOutcome outcome;
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    outcome.action = CliOutcome::Action::kPrint;
    outcome.text = app.help();
    return outcome;
  } catch (const CLI::CallForVersion&) {
    outcome.action = CliOutcome::Action::kPrint;
    outcome.text = VersionText() + "\n";
    return outcome;
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(DescribeParseError(e));
  }
  std::vector<std::string> positional = app.remaining();
  UnmarkEmptyValues(raw, positional);
  if (!positional.empty() && positional[0] == "--") positional.erase(positional.begin());
  if (positional.empty()) {
    return absl::InvalidArgumentError(
        "missing training_script: usage is ddprun [options] training_script [args...]");
  }
  if (absl::StartsWith(positional[0], "-")) {
    return absl::InvalidArgumentError(absl::StrCat("unknown option '", positional[0],
                                                   "'; see ddprun --help for the options"));
  }
  ApplyTorchEnvDefaults(raw, app);
  raw.node_rank_given = app.get_option("--node-rank")->count() > 0;
  raw.rdzv_id_given = app.get_option("--rdzv-id")->count() > 0;
  if (absl::Status s = FillConfig(raw, devices, outcome.config, outcome.notices); !s.ok()) return s;
  if (absl::Status s = BuildWorkerCommand(raw, positional, outcome.config); !s.ok()) return s;
  return outcome;
}

}  // namespace ddprun
