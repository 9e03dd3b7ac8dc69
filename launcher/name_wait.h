#pragma once
// A node waits for the master's name to resolve before it joins. In Kubernetes the name a
// PyTorchJob or Kubeflow Trainer gives every pod (PET_MASTER_ADDR, a headless service) resolves
// only once the master's pod is ready, seconds to minutes after the others start; torchrun's
// store client retries it until its timeout. So does ddprun, saying so, up to join_timeout.

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ddprun {

struct NameWait {
  std::string host;
  std::string what;  // the option that named it: "--master-addr", "--rdzv-endpoint"
  absl::Duration bound = absl::Seconds(600);  // join_timeout
  absl::Duration progress_every = absl::Seconds(10);
};

/// What the wait uses of the world: the resolver (CheckResolves), the monotonic clock, a pause
/// that returns the stop signal that ended it early (0 when none came), and the log.
struct NameWaitWorld {
  std::function<absl::Status()> resolve;
  std::function<absl::Time()> now;
  std::function<int(absl::Duration)> pause;
  std::function<void(const std::string&)> warn;
  std::function<void(const std::string&)> info;
};

/// OK once `wait.host` resolves. The first failure is said with how long the node waits; then
/// a line every `progress_every` with the time left. After `bound`, FailedPrecondition naming
/// the host, the resolver's last reason and join_timeout; after a stop signal, Cancelled
/// with the signal's number as its message.
absl::Status WaitUntilResolves(const NameWait& wait, const NameWaitWorld& world);

}  // namespace ddprun
