#pragma once
// A run's RunMemory (rendezvous/round_state_machine.h) as the bytes an elected leader keeps
// in etcd under <prefix>/<run id>/state (docs/etcd.md), and back. Whoever may write the run's
// prefix may have written what is read: every field is bounded, and the error names the
// first that is not.

#include <string>

#include "absl/status/statusor.h"
#include "rendezvous/round_state_machine.h"

namespace ddprun {

std::string RunMemoryToBytes(const RunMemory& memory);
absl::StatusOr<RunMemory> RunMemoryFromBytes(const std::string& bytes);

}  // namespace ddprun
