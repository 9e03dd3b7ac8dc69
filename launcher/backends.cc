#include "launcher/backends.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "launcher/cli_values.h"
#include "launcher/option_values.h"
#include "launcher/rendezvous_start.h"

namespace ddprun {
namespace {

// --rdzv-endpoint with several hosts is an elected backend's list of its store's members.
absl::Status OneEndpoint(const AgentConfig& config) {
  if (config.rdzv_endpoint.find("://") != std::string::npos) {
    return ParseEndpoint(config.rdzv_endpoint, 29400).status();  // says what is expected
  }
  if (config.rdzv_endpoint.find(',') == std::string::npos) return absl::OkStatus();
  std::vector<std::string> several;
  for (const RendezvousBackend& backend : RendezvousBackends()) {
    if (backend.listed && backend.several_endpoints) several.push_back(backend.name);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--rdzv-endpoint='", config.rdzv_endpoint,
      "' names several hosts, but --rdzv-backend=", config.rdzv_backend, " takes one (HOST[:PORT])",
      several.empty() ? ""
                      : absl::StrCat(": several are a store's members, for --rdzv-backend=",
                                     absl::StrJoin(several, " or --rdzv-backend="))));
}

// c10d: any node may host the master (the --rdzv-endpoint host); ranks follow arrival.
absl::Status CheckC10d(const OptionValues& values, AgentConfig& config) {
  DDPRUN_RETURN_IF_ERROR(OneEndpoint(config));
  if (config.rendezvous.max_nodes > 1 && values["--rdzv-endpoint"].empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--nnodes=", values["--nnodes"],
        " with --rdzv-backend=c10d needs "
        "--rdzv-endpoint=HOST[:PORT]: the address of the node (or ddprun-master) that all "
        "nodes can reach"));
  }
  return absl::OkStatus();
}

std::unique_ptr<StartedRendezvous> StartC10d(const RendezvousBackend& backend,
                                             const AgentConfig& config, int& exit_code) {
  return StartRendezvous(backend, config, "--rdzv-endpoint host", exit_code);
}

// static: a fixed number of nodes, each with its --node-rank; node 0 hosts the master at
// --master-addr:--master-port.
absl::Status CheckStatic(const OptionValues& values, AgentConfig& config) {
  config.fixed_node_rank = true;
  DDPRUN_RETURN_IF_ERROR(OneEndpoint(config));
  if (config.rendezvous.max_nodes == 1) return absl::OkStatus();
  if (config.rendezvous.min_nodes != config.rendezvous.max_nodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--nnodes=", values["--nnodes"],
                     " with --rdzv-backend=static must be a fixed count: "
                     "use --rdzv-backend=c10d for an elastic range"));
  }
  if (values["--master-addr"].empty() || !config.master_port) {
    return absl::InvalidArgumentError(
        "--rdzv-backend=static with several nodes needs --master-addr and --master-port: "
        "the address and port of node 0, where the rendezvous master runs");
  }
  if (config.node_rank >= config.rendezvous.max_nodes) {
    return absl::InvalidArgumentError(absl::StrCat("--node-rank=", config.node_rank,
                                                   " is not valid: expected 0 to ",
                                                   config.rendezvous.max_nodes - 1));
  }
  config.endpoint_host = values["--master-addr"];
  config.endpoint_port = *config.master_port;
  return absl::OkStatus();
}

std::unique_ptr<StartedRendezvous> StartStatic(const RendezvousBackend& backend,
                                               const AgentConfig& config, int& exit_code) {
  return StartRendezvous(backend, config, "--master-addr", exit_code);
}

std::vector<RendezvousBackend>& Registry() {
  static auto* backends = [] {
    auto* all = new std::vector<RendezvousBackend>{
        {"c10d", CheckC10d, StartC10d, HostingRule::kEndpointHost, {}},
        {"static", CheckStatic, StartStatic, HostingRule::kNodeRankZero, {}},
    };
    for (RendezvousBackend& built : BuiltBackends()) all->push_back(std::move(built));
    return all;
  }();
  return *backends;
}

}  // namespace

const std::vector<RendezvousBackend>& RendezvousBackends() { return Registry(); }

absl::Status RegisterRendezvousBackend(RendezvousBackend backend) {
  if (FindRendezvousBackend(backend.name) != nullptr) {
    return absl::AlreadyExistsError(
        absl::StrCat("a rendezvous backend named '", backend.name, "' is registered already"));
  }
  Registry().push_back(std::move(backend));
  return absl::OkStatus();
}

void ApplyHostingRule(const RendezvousBackend& backend, AgentConfig& config) {
  if (config.is_host || config.rendezvous.max_nodes == 1) return;
  if (backend.hosting == HostingRule::kNodeRankZero) config.is_host = config.node_rank == 0;
}

const RendezvousBackend* FindRendezvousBackend(const std::string& name) {
  for (const RendezvousBackend& backend : RendezvousBackends()) {
    if (backend.name == name) return &backend;
  }
  return nullptr;
}

std::vector<std::string> RendezvousBackendNames() {
  std::vector<std::string> names;
  for (const RendezvousBackend& backend : RendezvousBackends()) {
    if (backend.listed) names.push_back(backend.name);
  }
  return names;
}

std::string RendezvousBackendChoices(const std::string& conjunction) {
  std::vector<std::string> names = RendezvousBackendNames();
  if (names.size() < 2) return absl::StrJoin(names, "");
  const std::string last = names.back();
  names.pop_back();
  return absl::StrCat(absl::StrJoin(names, ", "), " ", conjunction, " ", last);
}

}  // namespace ddprun
