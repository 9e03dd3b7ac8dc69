#include "node/cpu_topology.h"

#include <errno.h>
#include <hwloc.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/child_answer.h"
#include "common/small_file.h"
#include "common/unique_fd.h"

namespace ddprun {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* topology) const { hwloc_topology_destroy(topology); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

absl::StatusOr<Topology> Load(const std::string& xml_path) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return absl::InternalError("hwloc_topology_init failed");
  Topology topology(raw);
  if (!xml_path.empty()) {
    // An export's PCI devices say where its accelerators are (this machine's: sysfs).
    hwloc_topology_set_type_filter(raw, HWLOC_OBJ_PCI_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
    if (hwloc_topology_set_xml(raw, xml_path.c_str()) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("hwloc cannot read the topology XML ", xml_path));
    }
  }
  if (hwloc_topology_load(raw) != 0) {
    return absl::InternalError(
        absl::StrCat("hwloc cannot read this machine's topology",
                     xml_path.empty() ? "" : absl::StrCat(" from ", xml_path)));
  }
  return topology;
}

// The lowest PU under `obj`'s cpuset: the key torch groups CPUs by.
int FirstPu(hwloc_obj_t obj) { return obj == nullptr ? -1 : hwloc_bitmap_first(obj->cpuset); }

int NumaOf(hwloc_topology_t topology, unsigned pu) {
  for (hwloc_obj_t node = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, nullptr);
       node != nullptr; node = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, node)) {
    if (hwloc_bitmap_isset(node->cpuset, pu)) return static_cast<int>(node->os_index);
  }
  return -1;
}

CpuTopology::Cpu CpuOf(hwloc_topology_t topology, hwloc_obj_t pu) {
  CpuTopology::Cpu cpu;
  cpu.id = static_cast<int>(pu->os_index);
  cpu.numa = NumaOf(topology, pu->os_index);
  hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(topology, HWLOC_OBJ_PACKAGE, pu);
  cpu.package = package == nullptr ? 0 : static_cast<int>(package->logical_index);
  hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topology, HWLOC_OBJ_CORE, pu);
  cpu.core = core == nullptr ? cpu.id : FirstPu(core);
  // The highest-level cache shared by a group of cores: an AMD core complex shares its L3.
  hwloc_obj_t cache = hwloc_get_ancestor_obj_by_type(topology, HWLOC_OBJ_L3CACHE, pu);
  if (cache == nullptr) cache = hwloc_get_ancestor_obj_by_type(topology, HWLOC_OBJ_L2CACHE, pu);
  cpu.cache = FirstPu(cache);
  return cpu;
}

void ReadNodes(hwloc_topology_t topology, CpuTopology& out) {
  bool any_memory = false;
  for (hwloc_obj_t node = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, nullptr);
       node != nullptr; node = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE, node)) {
    out.numa_nodes.insert(static_cast<int>(node->os_index));
    if (node->attr->numanode.local_memory == 0) {
      out.memoryless_nodes.insert(static_cast<int>(node->os_index));
    } else {
      any_memory = true;
    }
  }
  if (!any_memory) out.memoryless_nodes.clear();  // sizes not known (a VM): assume memory
}

absl::StatusOr<CpuTopology> ReadTopology(const std::string& xml_path) {
  absl::StatusOr<Topology> loaded = Load(xml_path);
  if (!loaded.ok()) return loaded.status();
  hwloc_topology_t topology = loaded->get();
  CpuTopology out;
  for (hwloc_obj_t pu = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_PU, nullptr); pu != nullptr;
       pu = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_PU, pu)) {
    out.cpus.push_back(CpuOf(topology, pu));
  }
  ReadNodes(topology, out);
  for (hwloc_obj_t dev = hwloc_get_next_pcidev(topology, nullptr); dev != nullptr;
       dev = hwloc_get_next_pcidev(topology, dev)) {
    const auto& pci = dev->attr->pcidev;
    char address[32];
    std::snprintf(address, sizeof(address), "%04x:%02x:%02x.%x", pci.domain, pci.bus, pci.dev,
                  pci.func);
    hwloc_obj_t parent = hwloc_get_non_io_ancestor_obj(topology, dev);
    const bool one_node = parent != nullptr && hwloc_bitmap_weight(parent->nodeset) == 1;
    out.pci_numa[address] = one_node ? hwloc_bitmap_first(parent->nodeset) : -1;
  }
  std::sort(out.cpus.begin(), out.cpus.end(),
            [](const CpuTopology::Cpu& a, const CpuTopology::Cpu& b) { return a.id < b.id; });
  return out;
}

// One line per CPU ("cpu ID NUMA PACKAGE CORE CACHE") and per node ("node ID MEMORYLESS"):
// the child's answer.
std::string SerializeTopology(const CpuTopology& topology) {
  std::string text;
  for (const CpuTopology::Cpu& c : topology.cpus) {
    absl::StrAppend(&text, "cpu ", c.id, " ", c.numa, " ", c.package, " ", c.core, " ", c.cache,
                    "\n");
  }
  for (int node : topology.numa_nodes) {
    absl::StrAppend(&text, "node ", node, " ", topology.memoryless_nodes.count(node), "\n");
  }
  return text;
}

absl::StatusOr<CpuTopology> ParseTopology(const std::string& text) {
  if (absl::StartsWith(text, "error ")) return absl::InternalError(text.substr(6));
  CpuTopology topology;
  std::istringstream lines(text);
  std::string kind;
  while (lines >> kind) {
    if (kind == "cpu") {
      CpuTopology::Cpu c;
      lines >> c.id >> c.numa >> c.package >> c.core >> c.cache;
      topology.cpus.push_back(c);
    } else {
      int node = 0, memoryless = 0;
      lines >> node >> memoryless;
      topology.numa_nodes.insert(node);
      if (memoryless != 0) topology.memoryless_nodes.insert(node);
    }
  }
  if (topology.cpus.empty()) {
    return absl::InternalError("hwloc found no CPU on this machine");
  }
  return topology;
}

// The running machine's topology, read by hwloc in a child process: hwloc loads its plug-ins
// (OpenCL, Level Zero, GL: vendor libraries) at start, and none of them may stay in the agent.
// The child ignores the variables that make hwloc read another machine.
absl::StatusOr<CpuTopology> ReadThisMachineInAChild() {
  absl::StatusOr<std::string> answer = AnswerFromChild(
      [] {
        for (const char* name :
             {"HWLOC_XMLFILE", "HWLOC_FSROOT", "HWLOC_SYNTHETIC", "HWLOC_CPUID_PATH"}) {
          ::unsetenv(name);
        }
        absl::StatusOr<CpuTopology> topology = ReadTopology("");
        return topology.ok() ? SerializeTopology(*topology)
                             : "error " + std::string(topology.status().message());
      },
      "CPU topology");
  if (!answer.ok()) return answer.status();
  return ParseTopology(*answer);
}

}  // namespace

absl::StatusOr<CpuTopology> LoadCpuTopology(const std::string& xml_path) {
  return xml_path.empty() ? ReadThisMachineInAChild() : ReadTopology(xml_path);
}

std::map<std::string, int> ReadPciNumaNodes(const std::string& sys_root,
                                            const std::vector<std::string>& addresses) {
  std::map<std::string, int> nodes;
  for (const std::string& address : addresses) {
    if (address.empty()) continue;
    absl::StatusOr<std::string> text =
        ReadSmallFile(absl::StrCat(sys_root, "/bus/pci/devices/", address, "/numa_node"));
    int node = -1;
    if (!text.ok() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &node)) node = -1;
    nodes[address] = node;
  }
  return nodes;
}

absl::StatusOr<std::set<int>> AllowedCpus() {
  cpu_set_t* mask = CPU_ALLOC(kMaxCpus);
  const size_t size = CPU_ALLOC_SIZE(kMaxCpus);
  std::set<int> cpus;
  if (::sched_getaffinity(0, size, mask) != 0) {
    const int error = errno;
    CPU_FREE(mask);
    return ErrnoStatus(error, "sched_getaffinity (the CPUs ddprun may use)");
  }
  for (int cpu = 0; cpu < kMaxCpus; ++cpu) {
    if (CPU_ISSET_S(cpu, size, mask)) cpus.insert(cpu);
  }
  CPU_FREE(mask);
  return cpus;
}

absl::StatusOr<std::set<int>> ParseCpuList(const std::string& text) {
  std::set<int> cpus;
  const auto bad = [&text] {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "' is not a CPU list: expected numbers and ranges such as 0-3,8,10-11"));
  };
  if (text.empty()) return bad();
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    std::pair<absl::string_view, absl::string_view> range = absl::StrSplit(item, '-');
    int first = 0, last = 0;
    if (!absl::SimpleAtoi(range.first, &first) || first < 0) return bad();
    last = first;
    if (item.find('-') != absl::string_view::npos &&
        (!absl::SimpleAtoi(range.second, &last) || last < first)) {
      return bad();
    }
    if (last >= kMaxCpus) {
      return absl::InvalidArgumentError(
          absl::StrCat("CPU ", last, " in '", text, "' is beyond the ", kMaxCpus, " supported"));
    }
    for (int cpu = first; cpu <= last; ++cpu) cpus.insert(cpu);
  }
  return cpus;
}

std::string FormatCpuList(const std::set<int>& cpus) {
  std::vector<std::string> ranges;
  for (auto it = cpus.begin(); it != cpus.end();) {
    const int first = *it;
    int last = first;
    for (++it; it != cpus.end() && *it == last + 1; ++it) last = *it;
    ranges.push_back(first == last ? absl::StrCat(first) : absl::StrCat(first, "-", last));
  }
  return absl::StrJoin(ranges, ",");
}

}  // namespace ddprun
