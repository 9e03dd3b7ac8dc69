#pragma once
// Counting this node's GPUs without linking CUDA: the agent must run on CPU-only machines.

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace ddprun {

/// The GPUs a worker will see: libcuda's cuDeviceGetCount (which honours
/// CUDA_VISIBLE_DEVICES), else NVML's count filtered by CUDA_VISIBLE_DEVICES; 0 when there is
/// no driver. The driver is loaded with dlopen in a short-lived child process, so none of
/// its memory or threads stay in the agent.
absl::StatusOr<int> CountVisibleGpus();

/// How many of `physical_count` devices CUDA_VISIBLE_DEVICES=`visible` exposes (CUDA's rule:
/// the list ends at the first entry that is not a valid index or GPU-/MIG- UUID).
int ApplyCudaVisibleDevices(const std::optional<std::string>& visible, int physical_count);

}  // namespace ddprun
