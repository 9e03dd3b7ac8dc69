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

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "agent/elastic_agent.h"
#include "agent/exit_codes.h"
#include "agent/gpu_probe.h"
#include "agent/orphan_guard.h"
#include "agent/unique_fd.h"
#include "agent/worker_env.h"
#include "launcher/cli.h"
#include "agent/host_info.h"
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
  auto logger = spdlog::stderr_logger_st("ddprun");
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

// The agent on the --rdzv-endpoint host (is_host, inferred as torchrun does unless
// --rdzv-conf is_host= says) serves the master in-process. When several agents on one host
// race for the port, the losers simply join the winner's master.
std::unique_ptr<ddprun::HostedMaster> MaybeHostMaster(const ddprun::NetworkPlugin& network,
                                                      const ddprun::AgentConfig& config) {
  const bool is_host = config.is_host ? *config.is_host : ddprun::IsThisHost(config.endpoint_host);
  if (!is_host) return nullptr;
  ddprun::MasterOptions options;
  // Every address of this host, as torch's TCPStore listens: the endpoint's name may resolve
  // here to another address than the other nodes reach (Debian maps a host's own name to
  // 127.0.1.1), and a master bound to that one would be out of their reach.
  options.host = config.endpoint_host.find(':') != std::string::npos ? "::" : "0.0.0.0";
  options.port = config.endpoint_port;
  options.token = config.token;
  options.only_run_id = config.run_id;
  options.store_timeout = config.read_timeout;
  options.tls = config.tls;
  absl::StatusOr<std::unique_ptr<ddprun::HostedMaster>> master = network.host_master(options);
  if (!master.ok()) {
    spdlog::info("not hosting the rendezvous master ({}); joining the one at {}:{}",
                 master.status().message(), config.endpoint_host, config.endpoint_port);
    return nullptr;
  }
  spdlog::info("hosting the rendezvous master for run '{}' on {}:{}", config.run_id,
               config.endpoint_host, (*master)->port());
  return std::move(*master);
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
  std::unique_ptr<ddprun::HostedMaster> master;
  std::unique_ptr<ddprun::RendezvousConnection> rendezvous;
  if (config.max_nodes == 1) {
    rendezvous = std::make_unique<ddprun::LocalRendezvous>(config.max_restarts);
  } else {
    absl::StatusOr<ddprun::NetworkPlugin> network = ddprun::LoadNetworkPlugin();
    if (!network.ok()) {
      spdlog::error("{}", network.status().message());
      return ddprun::kExitInternal;
    }
    master = MaybeHostMaster(*network, config);
    rendezvous = network->connect(RendezvousOptions(config));
  }
  ddprun::ElasticAgent agent(config, ddprun::CurrentEnvironment(), *rendezvous, *guard);
  const int status = agent.Run();
  rendezvous.reset();
  if (master) {
    if (agent.others_still_run()) ServeWhileOthersRun(*master, config);
    master->Shutdown(config.close_timeout);
  }
  return status;
}
