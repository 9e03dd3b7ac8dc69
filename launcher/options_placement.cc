#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "launcher/options.h"
#include "node/cpu_binding.h"

namespace ddprun {
namespace {

constexpr char kBindingGroup[] = "CPU and memory binding";

absl::Status VirtualLocalRank(const std::string& value, ParseState& s) {
  s.config.virtual_local_rank = !value.empty();
  return absl::OkStatus();
}

absl::Status NumaBindingMode(const std::string& value, ParseState& s) {
  if (value.empty()) return absl::OkStatus();
  DDPRUN_ASSIGN_OR_RETURN(s.config.cpu_binding.numa, ParseNumaBinding(value));
  return absl::OkStatus();
}

// "auto", or one CPU list per local rank separated by ':' ("0-3:4-7").
absl::Status CpuAffinity(const std::string& value, ParseState& s) {
  if (value.empty()) return absl::OkStatus();
  CpuBindingSettings& binding = s.config.cpu_binding;
  if (binding.numa != NumaBinding::kNone) {
    return absl::InvalidArgumentError(
        "--cpu-affinity and --numa-binding both choose the workers' CPUs: give one of them");
  }
  if (value == "auto") {
    binding.auto_split = true;
    return absl::OkStatus();
  }
  for (absl::string_view list : absl::StrSplit(value, ':')) {
    absl::StatusOr<std::set<int>> cpus = ParseCpuList(std::string(list));
    if (!cpus.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--cpu-affinity='", value, "' is not valid: ", cpus.status().message(),
          "; expected auto, or one CPU list per local rank separated by ':' (0-3:4-7)"));
    }
    binding.lists.push_back(*cpus);
  }
  if (static_cast<int>(binding.lists.size()) != s.config.nproc_per_node) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cpu-affinity='", value, "' lists CPUs for ", binding.lists.size(),
                     " local ranks, but --nproc-per-node is ", s.config.nproc_per_node,
                     ": give one list per local rank, separated by ':'"));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<OptionSpec> WithPlacementOptions(std::vector<OptionSpec> table) {
  table.push_back(
      Option("--virtual-local-rank", VirtualLocalRank)
          .In(kWorkerGroup)
          .Flag()
          .Help("Every worker gets LOCAL_RANK=0 and sees only its own accelerator "
                "(CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES or ZE_AFFINITY_MASK set to the "
                "entry of the inherited list, or the index, at its local rank)"));
  table.push_back(
      Option("--numa-binding", NumaBindingMode)
          .In(kBindingGroup)
          .Completes({"node", "socket", "exclusive", "core-complex"})
          .Help("Bind each worker to the CPUs near its accelerator (local rank i uses device "
                "i), memory preferred on that NUMA node: node (the device's NUMA node), "
                "socket (its package), exclusive (an equal share of the node's cores per "
                "device) or core-complex (one L3 cache's cores); with no accelerator, local "
                "ranks take the NUMA nodes in turn (docs/numa.md)"));
  table.push_back(
      Option("--cpu-affinity", CpuAffinity)
          .In(kBindingGroup)
          .Completes({"auto"})
          .Help("Bind worker i to the i-th CPU list, e.g. 0-7:8-15 for two local ranks, or "
                "'auto': the allowed physical cores split evenly over the local ranks "
                "(ddprun only)"));
  return table;
}

}  // namespace ddprun
