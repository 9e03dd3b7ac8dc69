#pragma once
// AgentChildren: every process this agent starts, held by what started it, and the one place
// that answers "whose child is this pid" when SIGCHLD comes: the attempt's workers, the
// health checks, the warm pool's interpreter, or the orphan guard. Anything else is a
// worker's own child, re-parented to the agent (a subreaper): reaping it is all.

#include <memory>
#include <optional>

#include "agent/health/health_checks.h"
#include "agent/process/orphan_guard.h"
#include "agent/process/warm_pool.h"
#include "agent/worker_supervisor.h"

namespace ddprun {

struct AgentChildren {
  std::unique_ptr<WorkerSupervisor> workers;  // the current attempt; null between attempts
  std::optional<HealthChecks> health_checks;  // made with the event loop
  std::unique_ptr<WarmPool> warm_pool;        // --preload

  /// Reaps every child that has exited, each told to the one that started it.
  void ReapAll(const OrphanGuard& guard);
};

}  // namespace ddprun
