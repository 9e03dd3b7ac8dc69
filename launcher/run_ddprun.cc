// RunDdprun: what `ddprun` does, from its command line to its exit status (main.cc calls it;
// tests call it in child processes, with backends of their own registered first).

#include "launcher/run_ddprun.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "agent/elastic_agent.h"
#include "agent/health/health_check_process.h"
#include "agent/logs/log_format.h"
#include "agent/process/orphan_guard.h"
#include "common/exit_codes.h"
#include "common/unique_fd.h"
#include "launcher/admin_command.h"
#include "launcher/backends.h"
#include "launcher/cli.h"
#include "launcher/placement.h"
#include "node/accelerators.h"
#include "spdlog/sinks/stdout_sinks.h"
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

// --metrics-port: the agent publishes to `board`, which the port serves (with the master's
// metrics and status page when this node hosts the master). False: said in the log.
bool ServeMetrics(int port, ddprun::StartedRendezvous& rendezvous, ddprun::ElasticAgent& agent,
                  ddprun::AgentMetricsBoard& board) {
  if (std::optional<ddprun::WorkerStore> store = rendezvous.worker_store();
      store && store->server) {
    board.CountStoreWith([server = store->server] { return server->OperationCounts(); });
  }
  if (absl::Status s = rendezvous.ServeMetrics(port, &board); !s.ok()) {
    spdlog::error("--metrics-port: {}", s.message());
    return false;
  }
  agent.PublishMetricsTo(&board);
  return true;
}

// The agent reads its signals from a signalfd: they must be blocked in every thread, so
// before gRPC or anything else starts one (a SIGCHLD taken by another thread is lost).
void BlockHandledSignals(const ddprun::AgentConfig& config) {
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGCHLD);
  for (int sig : config.signals_to_handle) sigaddset(&handled, sig);
  ::pthread_sigmask(SIG_BLOCK, &handled, nullptr);
}

using Accelerators = std::function<absl::StatusOr<ddprun::AcceleratorList>()>;

// --nproc-per-node's gpu and auto, counted from `accelerators` when asked; xpu, Intel's
// GPUs whatever else the node has (torch.xpu.device_count()).
ddprun::DeviceCounts CountDevicesWith(const Accelerators& accelerators, const ddprun::EnvMap& env) {
  ddprun::DeviceCounts devices;
  devices.count_gpus = [accelerators]() -> absl::StatusOr<int> {
    absl::StatusOr<ddprun::AcceleratorList> list = accelerators();
    if (!list.ok()) return list.status();
    return static_cast<int>(list->devices.size());
  };
  devices.count_xpus = [&env]() -> absl::StatusOr<int> {
    return static_cast<int>(ddprun::FindIntelGpus("/sys", env).devices.size());
  };
  devices.cpu_count = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  return devices;
}

}  // namespace

namespace ddprun {

int RunDdprun(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == ddprun::kHealthCheckMode) {
    // The agent's node check, in a child process of its own (agent/health/health_check_process.h).
    return ddprun::RunHealthCheckProcess(std::vector<std::string>(argv, argv + argc));
  }
  // A closed console must not kill the agent (and with it every worker): writes just fail.
  ::signal(SIGPIPE, SIG_IGN);
  ddprun::CloseInheritedOnExec();
  if (argc >= 2 && ddprun::IsAdminCommand(argv[1])) {
    return ddprun::RunAdminCommandLine(std::vector<std::string>(argv + 1, argv + argc),
                                       ddprun::LaunchEnvironment::OfThisProcess());
  }
  // Read once: the command line's rules and the workers' base environment.
  ddprun::LaunchEnvironment env = ddprun::LaunchEnvironment::OfThisProcess();
  // The node's accelerators, found once and only when an option needs them.
  std::optional<absl::StatusOr<ddprun::AcceleratorList>> found;
  const Accelerators accelerators = [&]() -> absl::StatusOr<ddprun::AcceleratorList> {
    if (!found) found = ddprun::FindAccelerators(env.vars);
    return *found;
  };
  const ddprun::DeviceCounts devices = CountDevicesWith(accelerators, env.vars);
  absl::StatusOr<ddprun::CliOutcome> cli =
      ddprun::ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc), devices, env);
  if (!cli.ok()) return UsageError(std::string(cli.status().message()));
  if (cli->action == ddprun::CliOutcome::Action::kPrint) {
    std::fputs(cli->text.c_str(), stdout);
    return ddprun::kExitSuccess;
  }
  std::string log_error;
  if (!ConfigureLogging(log_error)) return UsageError(log_error);
  for (const std::string& notice : cli->notices) spdlog::warn("{}", notice);
  if (const ddprun::WorkerInterpreter& python = cli->config.interpreter; !python.path.empty()) {
    spdlog::info("Python workers run {} ({})", python.path, python.chosen);
  }
  if (absl::Status s = ddprun::PlaceWorkers(accelerators, env.vars, cli->config); !s.ok()) {
    return UsageError(std::string(s.message()));
  }

  BlockHandledSignals(cli->config);

  // Orphaned grandchildren of workers come back to the agent to be reaped, not to init.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  absl::StatusOr<ddprun::OrphanGuard> guard = ddprun::OrphanGuard::Start();
  if (!guard.ok()) {
    spdlog::error("cannot start: {}", guard.status().message());
    return ddprun::kExitInternal;
  }
  const ddprun::AgentConfig& config = cli->config;
  ddprun::AgentMetricsBoard metrics;  // before the rendezvous, whose metrics server reads it
  int failed = 0;
  const ddprun::RendezvousBackend& backend = *ddprun::FindRendezvousBackend(config.rdzv_backend);
  std::unique_ptr<ddprun::StartedRendezvous> rendezvous = backend.start(backend, config, failed);
  if (rendezvous == nullptr) return failed;
  ddprun::ElasticAgent agent(config, std::move(env.vars), rendezvous->connection(), *guard,
                             rendezvous->worker_store());
  if (config.metrics_port && !ServeMetrics(*config.metrics_port, *rendezvous, agent, metrics)) {
    rendezvous->Stop(false);
    return ddprun::kExitCannotServe;
  }
  const int status = agent.Run();
  rendezvous->Stop(agent.others_still_run());
  return status;
}

}  // namespace ddprun
