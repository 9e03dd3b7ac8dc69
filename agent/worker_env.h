#pragma once
// The environment each worker starts with: the agent's own, plus torchrun's contract
// (docs/environment.md), made straight from the job's config, the attempt's plan (the round
// the rendezvous assigned) and the worker. Pure: no getenv, so every rule is unit-tested.

#include <string>

#include "agent/agent_config.h"
#include "agent/attempt_plan.h"
#include "common/env_map.h"

namespace ddprun {

/// One worker, as its environment needs it; the rest is the config's and the plan's.
struct WorkerSeat {
  int local_rank = 0;
  int rank = 0;
  std::string error_file;  // empty when error files are disabled
  int heartbeat_fd = -1;   // the worker's end of its heartbeat pipe; -1: none
};

/// The part of every worker's environment that is the same for each worker of each attempt
/// on this node: what the warm pool's interpreter imports with (--preload), since a module
/// may read the environment at import. BuildWorkerEnv starts from it.
EnvMap NodeWorkerEnv(const EnvMap& base, const AgentConfig& config);

/// `base` (the agent's environment) overlaid with the variables of `worker` in the round of
/// `plan`, as `config` asks.
EnvMap BuildWorkerEnv(const EnvMap& base, const AgentConfig& config, const AttemptPlan& plan,
                      const WorkerSeat& worker);

/// Whether BuildWorkerEnv will set OMP_NUM_THREADS=1 (so the agent can say so once).
bool WillDefaultOmpThreads(const EnvMap& base, int local_world_size);

/// `arg` with every `${local_rank}` replaced by `local_rank`, as torchrun's macros do.
std::string SubstituteLocalRank(const std::string& arg, int local_rank);

}  // namespace ddprun
