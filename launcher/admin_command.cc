#include "launcher/admin_command.h"

#include <stdio.h>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/exit_codes.h"
#include "common/listen_socket.h"
#include "common/status_macros.h"
#include "launcher/backends.h"
#include "launcher/cli_rules.h"
#include "launcher/cli_values.h"
#include "net/network_plugin.h"

namespace ddprun {
namespace {

struct AdminLine {
  std::string backend = "c10d";
  std::string endpoint;
  std::string run_id;
  std::string rdzv_conf;
  std::string reason;
  bool json = false;
  double timeout_s = 10;
};

// The command: the endpoint, the token and TLS files as the agents take them.
absl::StatusOr<AdminCommand> CommandFrom(AdminCommand::Kind kind, const AdminLine& line,
                                         const RendezvousBackend& backend,
                                         const LaunchEnvironment& env) {
  AdminCommand command;
  command.kind = kind;
  command.run_id = line.run_id;
  command.json = line.json;
  command.reason = line.reason;
  command.timeout = absl::Seconds(line.timeout_s);
  AgentConfig config;
  config.rdzv_backend = line.backend;
  DDPRUN_ASSIGN_OR_RETURN(config.rdzv_conf, ParseRdzvConf(line.rdzv_conf));
  DDPRUN_RETURN_IF_ERROR(ReadRdzvConfFiles(config));
  TakeTokenFromEnvironment(env, config);
  if (backend.find_master != nullptr) {
    DDPRUN_RETURN_IF_ERROR(backend.find_master(line.endpoint, line.run_id, config, command));
  } else {
    DDPRUN_ASSIGN_OR_RETURN(Endpoint endpoint, ParseEndpoint(line.endpoint, 29400));
    command.endpoint = HostPort(endpoint.host, endpoint.port);
  }
  command.token = config.token;
  command.tls = config.tls;
  return command;
}

// Which backends find the master elsewhere than at --rdzv-endpoint: the registry says.
std::string BackendHelp() {
  std::vector<std::string> elsewhere;
  for (const RendezvousBackend& backend : RendezvousBackends()) {
    if (backend.listed && backend.find_master != nullptr) elsewhere.push_back(backend.name);
  }
  std::string help = "The run's rendezvous backend, as its agents were given it";
  if (!elsewhere.empty()) {
    absl::StrAppend(&help, "; ", absl::StrJoin(elsewhere, ", "),
                    ": --rdzv-endpoint is where the run's master is found (its leader)");
  }
  return absl::StrCat(help, " [default: c10d]");
}

// `ddprun status` / `ddprun stop`'s options, declared once: parsed by RunAdminCommandLine,
// listed for the shell completions by DescribeAdminOptions.
void DeclareAdminCommand(CLI::App& app, bool stop, AdminLine& line) {
  app.add_option("--rdzv-backend,--rdzv_backend", line.backend, BackendHelp());
  app.add_option("--rdzv-endpoint,--rdzv_endpoint", line.endpoint,
                 "The job's rendezvous master, HOST[:PORT] (as the agents were given it)")
      ->required();
  app.add_option("--rdzv-id,--rdzv_id", line.run_id,
                 stop ? "The run to stop" : "The run to show [default: list every run]")
      ->required(stop);
  app.add_option("--rdzv-conf,--rdzv_conf", line.rdzv_conf,
                 "token_file=PATH, tls_cert=, tls_key=, tls_ca= as the agents take them (the "
                 "token also from DDPRUN_RDZV_TOKEN)");
  if (stop) {
    app.add_option("--reason", line.reason, "Why, for every agent's log (at most 1024 bytes)");
  } else {
    app.add_flag("--json", line.json,
                 "Print the status as JSON (schema: docs/observability.md), for scripts");
  }
  app.add_option("--timeout", line.timeout_s, "Seconds to wait for the master [default: 10]")
      ->check(CLI::PositiveNumber);
}

}  // namespace

std::vector<OptionDoc> DescribeAdminOptions(const std::string& command) {
  CLI::App app;
  AdminLine line;
  DeclareAdminCommand(app, command == "stop", line);
  std::vector<OptionDoc> docs;
  for (const CLI::Option* option : app.get_options()) {
    OptionDoc doc;
    doc.names = {"--" + option->get_lnames().front()};
    doc.help = option->get_description();
    doc.takes_value = option->get_expected_min() > 0;
    docs.push_back(std::move(doc));
  }
  return docs;
}

bool IsAdminCommand(const std::string& first_arg) {
  return first_arg == "status" || first_arg == "stop";
}

int RunAdminCommandLine(const std::vector<std::string>& args, const LaunchEnvironment& env) {
  const bool stop = args.front() == "stop";
  CLI::App app(stop ? "ddprun stop: end a running job cleanly, from anywhere that reaches its "
                      "rendezvous master. Every agent stops its workers (SIGTERM, then SIGKILL "
                      "after the grace period) and exits 0 (143 in a job without a "
                      "token: anyone could have sent that stop)."
                    : "ddprun status: how a running job is, from its rendezvous master.",
               stop ? "ddprun stop" : "ddprun status");
  AdminLine line;
  DeclareAdminCommand(app, stop, line);
  std::vector<std::string> rest(args.rbegin(), args.rend() - 1);  // CLI11 takes them reversed
  try {
    app.parse(rest);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return kExitSuccess;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "ddprun %s: error: %s; see ddprun %s --help\n", args.front().c_str(),
                 e.what(), args.front().c_str());
    return kExitUsage;
  }
  const RendezvousBackend* backend = FindRendezvousBackend(line.backend);
  absl::StatusOr<AdminCommand> command =
      backend == nullptr
          ? absl::InvalidArgumentError(absl::StrCat("--rdzv-backend='", line.backend,
                                                    "' is not valid: expected ",
                                                    RendezvousBackendChoices("or")))
          : CommandFrom(stop ? AdminCommand::Kind::kStop : AdminCommand::Kind::kStatus, line,
                        *backend, env);
  if (!command.ok()) {
    std::fprintf(stderr, "ddprun %s: error: %s\n", args.front().c_str(),
                 std::string(command.status().message()).c_str());
    return kExitUsage;
  }
  absl::StatusOr<NetworkPlugin> network = LoadNetworkPlugin(backend->network);
  absl::StatusOr<std::string> answer =
      network.ok() ? network->admin(*command) : absl::StatusOr<std::string>(network.status());
  if (!answer.ok()) {
    std::fprintf(stderr, "ddprun %s: %s\n", args.front().c_str(),
                 std::string(answer.status().message()).c_str());
    return 1;
  }
  std::fputs(answer->c_str(), stdout);
  return kExitSuccess;
}

}  // namespace ddprun
