#pragma once
// Where each worker runs on this node, decided once before the agent starts: the
// accelerator --virtual-local-rank shows it, and the CPUs --numa-binding or --cpu-affinity
// bind it to. Problems are found here, before anything is started, and exit 2.

#include <functional>

#include "absl/status/status.h"
#include "agent/agent_config.h"
#include "node/accelerators.h"

namespace ddprun {

/// Fills in config.device_variable/device_values (--virtual-local-rank) and
/// config.worker_bindings (--numa-binding, --cpu-affinity), each logged at INFO.
/// `accelerators` is called only when one of them needs the node's devices.
absl::Status PlaceWorkers(const std::function<absl::StatusOr<AcceleratorList>()>& accelerators,
                          const EnvMap& env, AgentConfig& config);

}  // namespace ddprun
