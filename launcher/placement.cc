#include "launcher/placement.h"

#include "absl/strings/str_cat.h"
#include "agent/logs/log_format.h"
#include "common/status_macros.h"
#include "node/cpu_binding.h"
#include "node/cpu_topology.h"
#include "spdlog/spdlog.h"

namespace ddprun {
namespace {

absl::Status PlaceDevices(const AcceleratorList& accelerators, const EnvMap& env,
                          AgentConfig& config) {
  DDPRUN_ASSIGN_OR_RETURN(config.device_values,
                          VirtualDeviceValues(accelerators, env, config.nproc_per_node));
  config.device_variable = accelerators.visibility_variable;
  for (int lr = 0; lr < config.nproc_per_node; ++lr) {
    spdlog::info("--virtual-local-rank: local_rank {} runs with LOCAL_RANK=0 and {}={}", lr,
                 config.device_variable, config.device_values[lr]);
  }
  return absl::OkStatus();
}

absl::Status PlaceCpus(const AcceleratorList& accelerators, AgentConfig& config) {
  DDPRUN_ASSIGN_OR_RETURN(std::set<int> allowed, AllowedCpus());
  CpuTopology topology;  // lists as given need none: they bind CPUs only
  if (config.cpu_binding.lists.empty()) {
    DDPRUN_ASSIGN_OR_RETURN(topology, LoadCpuTopology());
  }
  std::vector<std::string> addresses;
  for (const Accelerator& device : accelerators.devices) addresses.push_back(device.pci_address);
  topology.pci_numa = ReadPciNumaNodes("/sys", addresses);
  DDPRUN_ASSIGN_OR_RETURN(
      config.worker_bindings,
      PlanCpuBindings(config.cpu_binding, topology, allowed, addresses, config.nproc_per_node));
  for (size_t lr = 0; lr < config.worker_bindings.size(); ++lr) {
    const WorkerBinding& binding = config.worker_bindings[lr];
    spdlog::info("local_rank {} is bound to CPUs {}{} ({})", lr, FormatCpuList(binding.cpus),
                 binding.preferred_node < 0
                     ? std::string()
                     : absl::StrCat(", memory preferred on NUMA node ", binding.preferred_node),
                 binding.reason);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PlaceWorkers(const std::function<absl::StatusOr<AcceleratorList>()>& accelerators,
                          const EnvMap& env, AgentConfig& config) {
  const bool numa = config.cpu_binding.numa != NumaBinding::kNone;
  if (!config.virtual_local_rank && !config.cpu_binding.enabled()) return absl::OkStatus();
  AcceleratorList devices;
  if (config.virtual_local_rank || numa) {
    absl::StatusOr<AcceleratorList> found = accelerators();
    if (!found.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(numa ? "--numa-binding" : "--virtual-local-rank",
                       ": cannot list this node's accelerators: ", found.status().message()));
    }
    devices = *std::move(found);
  }
  if (config.virtual_local_rank) DDPRUN_RETURN_IF_ERROR(PlaceDevices(devices, env, config));
  if (config.cpu_binding.enabled()) DDPRUN_RETURN_IF_ERROR(PlaceCpus(devices, config));
  return absl::OkStatus();
}

}  // namespace ddprun
