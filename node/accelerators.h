#pragma once
// This node's accelerators as a worker's runtime will number them: how many there are for
// --nproc-per-node=gpu|auto, the PCI address of each for --numa-binding, and the value of
// the visibility variable that shows a worker only its own for --virtual-local-rank. Found
// without linking any vendor library into the agent: NVIDIA through libcuda/NVML in a
// short-lived child (gpu_probe.h), AMD through the KFD topology in sysfs, Intel through DRM
// in sysfs, each honouring its runtime's visibility variables.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/env_map.h"

namespace ddprun {

enum class AcceleratorVendor { kNone, kNvidia, kAmd, kIntel };

struct Accelerator {
  // "0000:07:00.0" (lower-case hex, as in /sys/bus/pci/devices); empty: not known.
  std::string pci_address;
  // What `AcceleratorList::visibility_variable` must hold for a process to see this device
  // alone, as its device 0: "3", "GPU-8f2c...", or "1.0" for an Intel tile.
  std::string select_value;
};

struct AcceleratorList {
  AcceleratorVendor vendor = AcceleratorVendor::kNone;
  // The variable that selects devices for this vendor's runtime: CUDA_VISIBLE_DEVICES
  // (NVIDIA, and none found), HIP_VISIBLE_DEVICES (AMD), ZE_AFFINITY_MASK (Intel).
  std::string visibility_variable = "CUDA_VISIBLE_DEVICES";
  std::vector<Accelerator> devices;  // visible ones, in the runtime's order (device i = index i)
  // The devices are a laptop's or desktop's integrated GPU (Intel's 00:02.0): torch.xpu's,
  // but not what 'gpu' or 'auto' should start one worker for.
  bool integrated = false;
};

/// AMD GPUs as HIP numbers them: the GPU nodes of <sys_root>/class/kfd/kfd/topology/nodes
/// (numeric order), filtered by ROCR_VISIBLE_DEVICES (ROCr's rules), then by
/// HIP_VISIBLE_DEVICES, or CUDA_VISIBLE_DEVICES when that is unset or empty (HIP's rules).
/// No KFD topology: an empty list. `env` holds the agent's environment.
AcceleratorList FindAmdGpus(const std::string& sys_root, const EnvMap& env);

/// Intel GPUs as Level Zero and torch.xpu number them: <sys_root>/class/drm/card<N> whose PCI
/// vendor is 0x8086 and driver i915 or xe, discrete ones only when there is one (else the
/// integrated ones), one device per tile in FLAT hierarchy (ZE_FLAT_DEVICE_HIERARCHY; Data
/// Center GPU Max defaults to FLAT, everything else to COMPOSITE), filtered by
/// ZE_AFFINITY_MASK. No such card: an empty list.
AcceleratorList FindIntelGpus(const std::string& sys_root, const EnvMap& env);

/// Every accelerator of this machine that a worker would see: NVIDIA's (gpu_probe.h) if any,
/// else AMD's, else Intel's discrete ones; an empty list (vendor kNone) when there is none.
/// An integrated Intel GPU alone is not counted here (see FindIntelGpus for 'xpu'): the
/// machine is then taken for a CPU machine, as torchrun with a CUDA build takes it.
absl::StatusOr<AcceleratorList> FindAccelerators(const EnvMap& env);

/// --virtual-local-rank: what `accelerators.visibility_variable` holds for each of `nproc`
/// local ranks. NVIDIA (and no accelerator at all), as torchrun: the entry of the inherited
/// CUDA_VISIBLE_DEVICES at the local rank, or the local rank when it is unset. AMD and Intel:
/// the device's select_value. Fewer devices than local ranks (NVIDIA: than the entries of
/// the list, or than the GPUs found): an error that says so.
absl::StatusOr<std::vector<std::string>> VirtualDeviceValues(const AcceleratorList& accelerators,
                                                             const EnvMap& env, int nproc);

}  // namespace ddprun
