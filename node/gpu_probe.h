#pragma once
// Counting this node's GPUs without linking CUDA: the agent must run on CPU-only machines.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddprun {

/// The NVIDIA GPUs a worker will see, as the PCI address of each ("0000:07:00.0"; empty when
/// not known), in CUDA's order: libcuda's devices (which honour CUDA_VISIBLE_DEVICES and
/// CUDA_DEVICE_ORDER), else NVML's count filtered by CUDA_VISIBLE_DEVICES (addresses
/// unknown); none when there is no driver. The driver is loaded with dlopen in a short-lived
/// child process, so none of its memory or threads stay in the agent.
absl::StatusOr<std::vector<std::string>> ProbeNvidiaGpus();

/// "0000:3B:00.0" or "00000000:3b:00.0" -> "0000:3b:00.0", as sysfs and hwloc write it; ""
/// when it is not an address.
std::string NormalizePciAddress(const std::string& bus_id);

/// How many of `physical_count` devices CUDA_VISIBLE_DEVICES=`visible` exposes (CUDA's rule:
/// the list ends at the first entry that is not a valid index or GPU-/MIG- UUID).
int ApplyCudaVisibleDevices(const std::optional<std::string>& visible, int physical_count);

}  // namespace ddprun
