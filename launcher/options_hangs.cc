// The "Hangs" section of the option table (options.h): workers that stop making progress
// without crashing, and workers SIGKILL does not end (docs/hangs.md).

#include "launcher/options.h"

namespace ddprun {
namespace {

constexpr char kHangGroup[] = "Hangs";

absl::Status KillTimeout(const std::string& value, ParseState& s) {
  return SecondsInto("--kill-timeout", value, s.config.rules.kill_timeout, /*positive=*/true);
}

absl::Status UninterruptibleStateTimeout(const std::string& value, ParseState& s) {
  return SecondsInto("--uninterruptible-state-timeout", value, s.config.uninterruptible_timeout);
}

absl::Status WorkerHeartbeatTimeout(const std::string& value, ParseState& s) {
  return SecondsInto("--worker-heartbeat-timeout", value, s.config.worker_heartbeat_timeout);
}

absl::Status WorkerHeartbeatStartupTimeout(const std::string& value, ParseState& s) {
  return SecondsInto("--worker-heartbeat-startup-timeout", value,
                     s.config.worker_heartbeat_startup_timeout);
}

}  // namespace

std::vector<OptionSpec> WithHangOptions(std::vector<OptionSpec> table) {
  const AgentConfig defaults;
  table.push_back(
      Option("--worker-heartbeat-timeout", WorkerHeartbeatTimeout)
          .In(kHangGroup)
          .Default(SecondsText(defaults.worker_heartbeat_timeout))
          .Help("Seconds a worker may go without writing to the pipe in DDPRUN_HEARTBEAT_FD, "
                "once it has written to it, before it is taken for hung, killed and the "
                "attempt fails; 0: off (ddprun only)"));
  table.push_back(
      Option("--worker-heartbeat-startup-timeout", WorkerHeartbeatStartupTimeout)
          .In(kHangGroup)
          .Default(SecondsText(defaults.worker_heartbeat_startup_timeout))
          .Help("With --worker-heartbeat-timeout: seconds a worker may take from its start to "
                "its first heartbeat, at least that timeout (the interpreter, imports, the "
                "process group: a Python thread cannot beat while `import torch` holds the "
                "GIL); 0: no bound (ddprun only)"));
  table.push_back(
      Option("--uninterruptible-state-timeout", UninterruptibleStateTimeout)
          .In(kHangGroup)
          .Default(SecondsText(defaults.uninterruptible_timeout))
          .TorchEnv("TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT")
          .Help("Seconds a worker may stay in uninterruptible sleep (state D) before the node "
                "is taken for unhealthy: its workers stop, no restart is spent, the agent "
                "leaves the job and exits 69; 0: off"));
  table.push_back(
      Option("--kill-timeout", KillTimeout)
          .In(kHangGroup)
          .Default(SecondsText(defaults.rules.kill_timeout))
          .Help("Seconds a worker may take to be gone after SIGKILL; one still there is "
                "reported unkillable with its state, and the agent leaves the job and exits "
                "69 (ddprun only)"));
  return table;
}

}  // namespace ddprun
