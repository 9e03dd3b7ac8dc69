#pragma once
// What an agent arranges once, before its first worker starts, so that a hung worker can be
// found and where it is read (docs/hangs.md): Python's faulthandler for the workers' own
// tracebacks, and the FIFO torch's FileTimer clients write to, when the job asks ddprun to
// serve it (TORCHELASTIC_ENABLE_FILE_TIMER=1).

#include <optional>

#include "absl/status/statusor.h"
#include "agent/hangs/timer_fifo.h"
#include "agent/process/orphan_guard.h"
#include "common/env_map.h"

namespace ddprun {

struct HangChecks {
  std::optional<TimerFifo> timer_fifo;  // the FIFO ddprun serves; none: not asked for
  // Workers are Python with faulthandler on (PYTHONFAULTHANDLER): SIGABRT makes them print
  // every thread's traceback on stderr.
  bool python_dumps = false;
};

/// Sets what the workers inherit in `env` (PYTHONFAULTHANDLER=1 unless set, empty to keep it
/// off; TORCHELASTIC_TIMER_FILE the FIFO's path). The FIFO and its folder go when the agent
/// dies, however it dies (`guard`).
absl::StatusOr<HangChecks> SetUpHangChecks(bool python_workers, EnvMap& env, OrphanGuard& guard);

}  // namespace ddprun
