#pragma once
// --numa-binding and --cpu-affinity: which CPUs each local rank's worker runs on and which
// NUMA node its memory is preferred on. Pure: the topology, the allowed CPUs and the
// accelerators' PCI addresses come in, one plan per local rank comes out.

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "node/cpu_topology.h"

namespace ddprun {

/// torchrun's --numa-binding modes (torch/numa/binding.py).
enum class NumaBinding {
  kNone,
  kNode,         // every CPU of the accelerator's NUMA node
  kSocket,       // every CPU of the NUMA nodes in the accelerator's socket
  kExclusive,    // an equal share of the node's physical cores per accelerator on the node
  kCoreComplex,  // the CPUs under one last-level cache (an AMD CCX/CCD) of the node
};

struct CpuBindingSettings {
  NumaBinding numa = NumaBinding::kNone;
  // --cpu-affinity=auto: the allowed physical cores split evenly over the local ranks.
  bool auto_split = false;
  // --cpu-affinity=LIST: the CPUs of each local rank, in order; empty: not given.
  std::vector<std::set<int>> lists;

  bool enabled() const { return numa != NumaBinding::kNone || auto_split || !lists.empty(); }
};

/// What one worker is bound to.
struct WorkerBinding {
  std::set<int> cpus;
  int preferred_node = -1;  // set_mempolicy(MPOL_PREFERRED); -1: left to the kernel
  std::string reason;       // for the log: "GPU 0000:07:00.0 on NUMA node 0"
};

/// The binding of each of `nproc` local ranks. --cpu-affinity lists need no topology (an
/// empty one: their memory is left to the kernel). `accelerators`: the PCI address of each
/// visible accelerator, in the order the runtime numbers them (local rank i uses device i);
/// with fewer than `nproc` (none: a CPU job), the ranks without one follow the local rank
/// over the NUMA nodes that have allowed CPUs. Every plan lies inside `allowed`.
absl::StatusOr<std::vector<WorkerBinding>> PlanCpuBindings(
    const CpuBindingSettings& settings, const CpuTopology& topology, const std::set<int>& allowed,
    const std::vector<std::string>& accelerators, int nproc);

/// "node", "socket", "exclusive", "core-complex" (torchrun's names).
absl::StatusOr<NumaBinding> ParseNumaBinding(const std::string& value);
const char* NumaBindingName(NumaBinding mode);

}  // namespace ddprun
