#include "node/cpu_binding.h"

#include <algorithm>
#include <map>
#include <type_traits>

#include "absl/strings/str_cat.h"

namespace ddprun {
namespace {

using Cpu = CpuTopology::Cpu;

// The CPUs of `topology` that are in `allowed`, each with what the rules group it by.
std::vector<Cpu> AllowedOf(const CpuTopology& topology, const std::set<int>& allowed) {
  std::vector<Cpu> out;
  for (const Cpu& cpu : topology.cpus) {
    if (allowed.count(cpu.id) > 0) out.push_back(cpu);
  }
  return out;
}

std::set<int> IdsOf(const std::vector<Cpu>& cpus) {
  std::set<int> ids;
  for (const Cpu& cpu : cpus) ids.insert(cpu.id);
  return ids;
}

// The allowed CPUs grouped by `key` (a core, a cache), each group in the order of its key.
template <typename Key>
std::vector<std::vector<Cpu>> GroupBy(const std::vector<Cpu>& cpus, Key key) {
  std::map<std::invoke_result_t<Key, const Cpu&>, std::vector<Cpu>> groups;
  for (const Cpu& cpu : cpus) groups[key(cpu)].push_back(cpu);
  std::vector<std::vector<Cpu>> out;
  for (auto& [k, group] : groups) out.push_back(std::move(group));
  return out;
}

// Share `rel` of `count` equal shares of `groups` (in order), the first `extra` shares one
// group larger: torch's exclusive split.
std::vector<Cpu> Share(const std::vector<std::vector<Cpu>>& groups, int rel, int count) {
  const int per = static_cast<int>(groups.size()) / count;
  const int extra = static_cast<int>(groups.size()) % count;
  const int start = rel * per + std::min(rel, extra);
  const int end = start + per + (rel < extra ? 1 : 0);
  std::vector<Cpu> out;
  for (int i = start; i < end; ++i) out.insert(out.end(), groups[i].begin(), groups[i].end());
  return out;
}

// The NUMA node of the only node of `cpus`; -1 when they span several.
int SingleNode(const std::vector<Cpu>& cpus) {
  std::set<int> nodes;
  for (const Cpu& cpu : cpus) nodes.insert(cpu.numa);
  return nodes.size() == 1 ? *nodes.begin() : -1;
}

// Where each local rank's accelerator is: its NUMA node, and the reason, for the log.
struct DevicePlace {
  int node = -1;
  std::string reason;
};

class NumaPlanner {
 public:
  NumaPlanner(const CpuBindingSettings& settings, const CpuTopology& topology,
              const std::set<int>& allowed, const std::vector<std::string>& accelerators, int nproc)
      : settings_(settings), topology_(topology), allowed_(AllowedOf(topology, allowed)) {
    std::set<int> nodes_with_cpus;
    for (const Cpu& cpu : allowed_) nodes_with_cpus.insert(cpu.numa);
    const std::vector<int> nodes(nodes_with_cpus.begin(), nodes_with_cpus.end());
    // Every visible accelerator has a place, used by the job or not (torch counts them all
    // in exclusive mode); without one, a local rank has the place of its turn.
    const size_t total = std::max(static_cast<size_t>(nproc), accelerators.size());
    for (size_t i = 0; i < total; ++i) {
      places_.push_back(PlaceOf(i < accelerators.size() ? accelerators[i] : "", i, nodes));
    }
  }

  absl::StatusOr<WorkerBinding> Plan(int local_rank) const {
    const DevicePlace& place = places_[local_rank];
    std::vector<Cpu> on_node;
    for (const Cpu& cpu : allowed_) {
      if (cpu.numa == place.node) on_node.push_back(cpu);
    }
    if (on_node.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("--numa-binding: local rank ", local_rank, "'s ", place.reason,
                       ", but none of that node's CPUs is allowed for ddprun (its affinity is ",
                       FormatCpuList(IdsOf(allowed_)),
                       "); run ddprun with those CPUs, or without "
                       "--numa-binding"));
    }
    WorkerBinding binding;
    // A node without memory (a CPU-only NUMA node) cannot be preferred: the kernel refuses.
    binding.preferred_node = topology_.memoryless_nodes.count(place.node) > 0 ? -1 : place.node;
    binding.reason = place.reason;
    absl::StatusOr<std::set<int>> cpus = CpusOf(local_rank, on_node);
    if (!cpus.ok()) return cpus.status();
    binding.cpus = *std::move(cpus);
    return binding;
  }

 private:
  // The accelerator at `pci`'s node; a device whose node the firmware does not say
  // (numa_node -1), or none, takes the `index`-th of `nodes` in turn.
  DevicePlace PlaceOf(const std::string& pci, size_t index, const std::vector<int>& nodes) const {
    auto it = topology_.pci_numa.find(pci);
    if (!pci.empty() && it != topology_.pci_numa.end() && it->second >= 0) {
      return {it->second, absl::StrCat("accelerator ", pci, " is on NUMA node ", it->second)};
    }
    const int node = nodes[index % nodes.size()];
    return {node, absl::StrCat("NUMA node ", node, ": no accelerator locality known, so the ",
                               nodes.size(), " nodes are taken in turn by local rank")};
  }

  // The mode's CPUs for `local_rank`, whose node's allowed CPUs are `on_node`.
  absl::StatusOr<std::set<int>> CpusOf(int local_rank, const std::vector<Cpu>& on_node) const {
    switch (settings_.numa) {
      case NumaBinding::kNode:
        return IdsOf(on_node);
      case NumaBinding::kSocket: {
        std::set<int> cpus;
        for (const Cpu& cpu : allowed_) {
          if (cpu.package == on_node.front().package) cpus.insert(cpu.id);
        }
        return cpus;
      }
      case NumaBinding::kExclusive:
        return ExclusiveCpus(local_rank, on_node);
      case NumaBinding::kCoreComplex: {
        // Larger complexes first, as torch; more sharers than complexes: they wrap around.
        auto groups = GroupBy(on_node, [](const Cpu& c) { return c.cache; });
        std::stable_sort(groups.begin(), groups.end(),
                         [](const auto& a, const auto& b) { return a.size() > b.size(); });
        return IdsOf(groups[SharersOf(local_rank).first % groups.size()]);
      }
      case NumaBinding::kNone:
        break;
    }
    return std::set<int>();
  }

  absl::StatusOr<std::set<int>> ExclusiveCpus(int local_rank,
                                              const std::vector<Cpu>& on_node) const {
    const auto [rel, count] = SharersOf(local_rank);
    const auto cores = GroupBy(on_node, [](const Cpu& c) { return c.core; });
    if (static_cast<int>(cores.size()) < count) {
      return absl::FailedPreconditionError(
          absl::StrCat("--numa-binding=exclusive: NUMA node ", places_[local_rank].node, " has ",
                       cores.size(), " allowed physical cores for ", count,
                       " accelerators or local ranks; use --numa-binding=node or core-complex"));
    }
    return IdsOf(Share(cores, rel, count));
  }

  // This rank's place among those on its node (accelerators, or ranks without one), and
  // how many there are.
  std::pair<int, int> SharersOf(int local_rank) const {
    int rel = 0, count = 0;
    for (size_t i = 0; i < places_.size(); ++i) {
      if (places_[i].node != places_[local_rank].node) continue;
      if (static_cast<int>(i) < local_rank) ++rel;
      ++count;
    }
    return {rel, count};
  }

  const CpuBindingSettings& settings_;
  const CpuTopology& topology_;
  const std::vector<Cpu> allowed_;
  std::vector<DevicePlace> places_;  // of every accelerator, or local rank without one
};

// --cpu-affinity=auto: the allowed physical cores, in NUMA node order, split evenly.
absl::StatusOr<std::vector<WorkerBinding>> PlanAutoSplit(const std::vector<Cpu>& allowed,
                                                         int nproc) {
  const auto cores = GroupBy(allowed, [](const Cpu& c) { return std::pair(c.numa, c.core); });
  if (static_cast<int>(cores.size()) < nproc) {
    return absl::FailedPreconditionError(
        absl::StrCat("--cpu-affinity=auto: ", cores.size(), " physical cores are allowed for ",
                     nproc, " local ranks; lower --nproc-per-node or list the CPUs per rank"));
  }
  std::vector<WorkerBinding> out;
  for (int lr = 0; lr < nproc; ++lr) {
    const std::vector<Cpu> share = Share(cores, lr, nproc);
    out.push_back({IdsOf(share), SingleNode(share),
                   absl::StrCat("share ", lr + 1, " of ", nproc, " of the allowed cores")});
  }
  return out;
}

// --cpu-affinity=LIST: as given, inside the allowed CPUs.
absl::StatusOr<std::vector<WorkerBinding>> PlanLists(const CpuBindingSettings& settings,
                                                     const CpuTopology& topology,
                                                     const std::set<int>& allowed) {
  std::vector<WorkerBinding> out;
  for (size_t lr = 0; lr < settings.lists.size(); ++lr) {
    std::set<int> outside;
    for (int cpu : settings.lists[lr]) {
      if (allowed.count(cpu) == 0) outside.insert(cpu);
    }
    if (!outside.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("--cpu-affinity: local rank ", lr, "'s CPUs ", FormatCpuList(outside),
                       " are not allowed for ddprun (its affinity is ", FormatCpuList(allowed),
                       "); list CPUs inside it"));
    }
    out.push_back({settings.lists[lr], SingleNode(AllowedOf(topology, settings.lists[lr])),
                   "--cpu-affinity list"});
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<WorkerBinding>> PlanCpuBindings(
    const CpuBindingSettings& settings, const CpuTopology& topology, const std::set<int>& allowed,
    const std::vector<std::string>& accelerators, int nproc) {
  if (!settings.lists.empty()) return PlanLists(settings, topology, allowed);
  const std::vector<Cpu> usable = AllowedOf(topology, allowed);
  if (usable.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("CPU binding: none of the CPUs ddprun may use (", FormatCpuList(allowed),
                     ") is in the machine's topology"));
  }
  if (settings.auto_split) return PlanAutoSplit(usable, nproc);
  NumaPlanner planner(settings, topology, allowed, accelerators, nproc);
  std::vector<WorkerBinding> out;
  for (int lr = 0; lr < nproc; ++lr) {
    absl::StatusOr<WorkerBinding> binding = planner.Plan(lr);
    if (!binding.ok()) return binding.status();
    out.push_back(std::move(*binding));
  }
  return out;
}

absl::StatusOr<NumaBinding> ParseNumaBinding(const std::string& value) {
  for (NumaBinding mode : {NumaBinding::kNode, NumaBinding::kSocket, NumaBinding::kExclusive,
                           NumaBinding::kCoreComplex}) {
    if (value == NumaBindingName(mode)) return mode;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--numa-binding='", value,
                   "' is not valid: expected node, socket, exclusive or core-complex"));
}

const char* NumaBindingName(NumaBinding mode) {
  switch (mode) {
    case NumaBinding::kNode:
      return "node";
    case NumaBinding::kSocket:
      return "socket";
    case NumaBinding::kExclusive:
      return "exclusive";
    case NumaBinding::kCoreComplex:
      return "core-complex";
    case NumaBinding::kNone:
      break;
  }
  return "none";
}

}  // namespace ddprun
