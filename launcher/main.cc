// ddprun: torchrun's command line, ddprun's agent.

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "agent/elastic_agent.h"
#include "common/exit_codes.h"
#include "agent/gpu_probe.h"
#include "agent/orphan_guard.h"
#include "common/unique_fd.h"
#include "agent/worker_env.h"
#include "launcher/cli.h"
#include "agent/host_info.h"
#include "rendezvous/node_address.h"
#include "agent/store_address.h"
#include "agent/tcp_store_server.h"
#include "absl/strings/str_cat.h"
#include "rendezvous/network_plugin.h"
#include "rendezvous/rendezvous_connection.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "agent/log_format.h"
#include "spdlog/spdlog.h"

namespace {

int UsageError(const std::string& message) {
  std::fprintf(stderr, "ddprun: error: %s\n", message.c_str());
  return ddprun::kExitUsage;
}

// LOGLEVEL as torchrun reads it (Python logging names); WARNING when unset.
bool ConfigureLogging(std::string& error) {
  // _mt: the workers' store and gRPC (multi-node) log from threads of their own.
  auto logger = spdlog::stderr_logger_mt("ddprun");
  logger->set_pattern("[ddprun] %Y-%m-%d %H:%M:%S.%e %l: %v");
  spdlog::set_default_logger(logger);
  const char* env = ::getenv("LOGLEVEL");
  const std::string level = absl::AsciiStrToUpper(env != nullptr ? env : "WARNING");
  if (level == "DEBUG") {
    spdlog::set_level(spdlog::level::debug);
  } else if (level == "INFO") {
    spdlog::set_level(spdlog::level::info);
  } else if (level == "WARNING" || level == "WARN") {
    spdlog::set_level(spdlog::level::warn);
  } else if (level == "ERROR") {
    spdlog::set_level(spdlog::level::err);
  } else if (level == "CRITICAL" || level == "FATAL") {
    spdlog::set_level(spdlog::level::critical);
  } else {
    error = "LOGLEVEL='" + std::string(env) +
            "' is not valid: expected DEBUG, INFO, WARNING, ERROR or CRITICAL";
    return false;
  }
  logger->flush_on(spdlog::level::trace);
  return true;
}

// The rendezvous master this agent hosts (if any) and the TCPStore it serves its workers.
struct Served {
  std::unique_ptr<ddprun::HostedMaster> master;
  std::unique_ptr<ddprun::TcpStoreServer> store;
  ddprun::WorkerStore worker_store;
};

void LogRefusedStoreClient(const std::string& peer, const std::string& why) {
  spdlog::warn("closed a connection to the workers' store from {}: {}; only that connection is "
               "closed, and the store call on it fails", peer, why);
}

// The agent on the --rdzv-endpoint host (is_host, inferred as torchrun does unless
// --rdzv-conf is_host= says) serves the master in-process, and its workers' TCPStore on the
// same port, as torchrun's static agent does: one port for the whole job. When several
// agents on one host race for the port, the losers simply join the winner's master.
void MaybeHostMaster(const ddprun::NetworkPlugin& network, const ddprun::AgentConfig& config,
                     Served& served) {
  const bool is_host = config.is_host ? *config.is_host : ddprun::IsThisHost(config.endpoint_host);
  if (!is_host) return;
  ddprun::MasterOptions options;
  options.port = config.endpoint_port;
  options.adopt_connections = true;  // the store listens, on every address, and hands them over
  options.token = config.token;
  options.only_run_id = config.run_id;
  options.store_timeout = config.read_timeout;
  options.tls = config.tls;
  absl::StatusOr<std::unique_ptr<ddprun::HostedMaster>> master = network.host_master(options);
  absl::Status hosting = master.status();
  std::unique_ptr<ddprun::TcpStoreServer> store;
  if (hosting.ok()) {
    ddprun::TcpStoreServerOptions store_options;
    store_options.port = config.endpoint_port;
    store_options.grpc_handoff = [hosted = master->get()](int listen_fd, int fd) {
      hosted->AdoptConnection(listen_fd, fd);
    };
    store_options.on_refused = LogRefusedStoreClient;
    absl::StatusOr<std::unique_ptr<ddprun::TcpStoreServer>> started =
        ddprun::TcpStoreServer::Start(store_options);
    if (started.ok()) store = std::move(*started);
    hosting = started.status();
  }
  if (!hosting.ok()) {
    // A port in use: another agent on this machine won the race, a detail. Anything else
    // is worth seeing: this agent meant to host and cannot.
    const auto level = absl::IsUnavailable(hosting) ? spdlog::level::info : spdlog::level::warn;
    spdlog::log(level, "not hosting the rendezvous master ({}); joining the one at {}:{}",
                hosting.message(), config.endpoint_host, config.endpoint_port);
    return;
  }
  spdlog::info("hosting the rendezvous master for run '{}' and the workers' store on {}:{}",
               config.run_id, config.endpoint_host, config.endpoint_port);
  served.master = std::move(*master);
  served.store = std::move(store);
}

// Every multi-node agent that may get group rank 0 serves its workers a TCPStore: beside the
// master it hosts, else on a port of its own (c10d: --master-port when given), held for its
// whole life, so that no worker binds a port and the port stays the same across rounds.
absl::Status ServeMasterAndStore(const ddprun::NetworkPlugin& network,
                                 const ddprun::AgentConfig& config, Served& served) {
  const bool is_static = config.rdzv_backend == "static";
  MaybeHostMaster(network, config, served);
  // Static: node 0's store is the one on --master-port; the other nodes never get rank 0.
  const bool on_master_port = served.store != nullptr || (is_static && config.node_rank != 0);
  if (!on_master_port) {
    ddprun::TcpStoreServerOptions options;
    options.port = !is_static && config.master_port ? *config.master_port : 0;
    options.on_refused = LogRefusedStoreClient;
    absl::StatusOr<std::unique_ptr<ddprun::TcpStoreServer>> store =
        ddprun::TcpStoreServer::Start(options);
    if (!store.ok()) {
      return absl::Status(store.status().code(),
                          absl::StrCat("cannot serve the workers' store",
                                       options.port != 0 ? absl::StrCat(" on --master-port=", options.port) : "",
                                       ": ", store.status().message()));
    }
    served.store = std::move(*store);
  }
  ddprun::StoreAddressFacts facts;
  facts.store_on_master_port = on_master_port;
  facts.endpoint_host = config.endpoint_host;
  facts.endpoint_is_this_host = ddprun::IsThisHost(config.endpoint_host);
  facts.local_addr = config.local_addr;
  facts.host_name = ddprun::HostName();
  facts.host_name_beyond_loopback = ddprun::ResolvesBeyondLoopback(facts.host_name);
  served.worker_store.server = served.store.get();
  served.worker_store.offer = ddprun::OfferStoreAddress(facts);
  served.worker_store.port = on_master_port ? config.endpoint_port : served.store->port();
  served.worker_store.pick_gloo_interface = !facts.host_name_beyond_loopback;
  return absl::OkStatus();
}

// An agent that hosts the master cannot leave while other nodes still use it (after the
// exit barrier timed out on this node): it serves on until they are gone, or until one of
// the signals it handles asks it to stop.
void ServeWhileOthersRun(const ddprun::HostedMaster& master, const ddprun::AgentConfig& config) {
  sigset_t stop;
  sigemptyset(&stop);
  for (int sig : config.signals_to_handle) sigaddset(&stop, sig);
  ddprun::UniqueFd signals(::signalfd(-1, &stop, SFD_CLOEXEC));
  spdlog::warn("other nodes still run and this node hosts their rendezvous master: serving "
               "it until they finish (send SIGTERM to stop now, which ends their run)");
  while (master.SessionCount(config.run_id) > 0) {
    pollfd fds[2] = {{master.session_end_fd(), POLLIN, 0}, {signals.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    uint64_t count = 0;
    (void)!::read(master.session_end_fd(), &count, sizeof count);
  }
}

ddprun::NetworkRendezvousOptions RendezvousOptions(const ddprun::AgentConfig& config) {
  ddprun::NetworkRendezvousOptions options;
  const bool v6 = config.endpoint_host.find(':') != std::string::npos;
  options.endpoint = v6 ? "[" + config.endpoint_host + "]:" + std::to_string(config.endpoint_port)
                        : config.endpoint_host + ":" + std::to_string(config.endpoint_port);
  options.run_id = config.run_id;
  options.token = config.token;
  options.settings.min_nodes = config.min_nodes;
  options.settings.max_nodes = config.max_nodes;
  options.settings.max_restarts = config.max_restarts;
  options.settings.join_timeout = config.join_timeout;
  options.settings.last_call_timeout = config.last_call_timeout;
  options.settings.keep_alive_interval = config.keep_alive_interval;
  options.settings.keep_alive_max_attempt = config.keep_alive_max_attempt;
  options.settings.exit_barrier_timeout = config.exit_barrier_timeout;
  options.heartbeat_timeout = config.heartbeat_timeout;
  options.tls = config.tls;
  return options;
}

// The multi-node half: the network plugin, the master this agent may host, the workers'
// store and the connection to the master. 0, or the status to exit with.
int StartMultiNode(const ddprun::AgentConfig& config, Served& served,
                   std::unique_ptr<ddprun::RendezvousConnection>& rendezvous) {
  absl::StatusOr<ddprun::NetworkPlugin> network = ddprun::LoadNetworkPlugin();
  if (!network.ok()) {
    spdlog::error("{}", network.status().message());
    return ddprun::kExitInternal;
  }
  // Every node must reach the master there, and its workers the store when it is there
  // too: a name that does not resolve is said now, not after join_timeout.
  if (absl::Status s = ddprun::CheckResolves(
          config.endpoint_host,
          config.rdzv_backend == "static" ? "--master-addr" : "--rdzv-endpoint host");
      !s.ok()) {
    spdlog::error("{}", s.message());
    return ddprun::kExitRendezvous;
  }
  if (absl::Status s = ServeMasterAndStore(*network, config, served); !s.ok()) {
    spdlog::error("{}", s.message());
    return ddprun::kExitInternal;
  }
  rendezvous = network->connect(RendezvousOptions(config));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A closed console must not kill the agent (and with it every worker): writes just fail.
  ::signal(SIGPIPE, SIG_IGN);
  ddprun::DeviceCounts devices;
  devices.count_gpus = ddprun::CountVisibleGpus;
  devices.cpu_count = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  absl::StatusOr<ddprun::CliOutcome> cli =
      ddprun::ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc), devices);
  if (!cli.ok()) return UsageError(std::string(cli.status().message()));
  if (cli->action == ddprun::CliOutcome::Action::kPrint) {
    std::fputs(cli->text.c_str(), stdout);
    return ddprun::kExitSuccess;
  }
  std::string log_error;
  if (!ConfigureLogging(log_error)) return UsageError(log_error);
  for (const std::string& notice : cli->notices) spdlog::warn("{}", notice);

  // The agent reads its signals from a signalfd: they must be blocked in every thread, so
  // before gRPC or anything else starts one (a SIGCHLD taken by another thread is lost).
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGCHLD);
  for (int sig : cli->config.signals_to_handle) sigaddset(&handled, sig);
  ::pthread_sigmask(SIG_BLOCK, &handled, nullptr);

  // Orphaned grandchildren of workers come back to the agent to be reaped, not to init.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  absl::StatusOr<ddprun::OrphanGuard> guard = ddprun::OrphanGuard::Start();
  if (!guard.ok()) {
    spdlog::error("cannot start: {}", guard.status().message());
    return ddprun::kExitInternal;
  }
  const ddprun::AgentConfig& config = cli->config;
  Served served;
  std::unique_ptr<ddprun::RendezvousConnection> rendezvous;
  std::optional<ddprun::WorkerStore> worker_store;
  if (config.max_nodes == 1) {
    rendezvous = std::make_unique<ddprun::LocalRendezvous>(config.max_restarts);
  } else if (const int failed = StartMultiNode(config, served, rendezvous); failed != 0) {
    return failed;
  } else {
    worker_store = served.worker_store;
  }
  ddprun::ElasticAgent agent(config, ddprun::CurrentEnvironment(), *rendezvous, *guard,
                             worker_store);
  const int status = agent.Run();
  rendezvous.reset();
  if (served.master) {
    if (agent.others_still_run()) ServeWhileOthersRun(*served.master, config);
    served.master->Shutdown(config.close_timeout);
  }
  served.store.reset();  // after the master: it hands the master its connections
  return status;
}
