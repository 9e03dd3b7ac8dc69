#pragma once
// This machine's CPUs as --numa-binding sees them: which NUMA node, package (socket),
// physical core and last-level cache each CPU belongs to, and the NUMA node each PCI device
// is attached to. Read with hwloc, from the running machine or from an XML export (`lstopo
// machine.xml`), so the binding rules are tested on the topologies of real servers.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddprun {

struct CpuTopology {
  struct Cpu {
    int id = 0;       // the kernel's CPU number (sched_setaffinity, /proc/self/status)
    int numa = -1;    // NUMA node; -1: none known
    int package = 0;  // socket
    int core = 0;     // the lowest CPU id of its physical core: hyperthreads share it
    int cache = -1;   // the lowest CPU id under its highest-level cache (L3, else L2); -1: none
  };
  std::vector<Cpu> cpus;           // by id
  std::set<int> numa_nodes;        // every NUMA node, with CPUs or not
  std::set<int> memoryless_nodes;  // nodes hwloc says have no memory (when others have some)
  // PCI address ("0000:07:00.0", lower-case) -> NUMA node its bridge is attached to; -1 when
  // the device is local to several nodes or to none (a VM's numa_node -1).
  std::map<std::string, int> pci_numa;
};

/// The running machine's topology, without its PCI devices (hwloc's PCI scan would triple
/// the time a launch takes; ReadPciNumaNodes gives the few that matter). `xml_path`
/// non-empty: an hwloc XML export instead, with the PCI devices it holds.
absl::StatusOr<CpuTopology> LoadCpuTopology(const std::string& xml_path = "");

/// The NUMA node of each PCI device in `addresses`, from <sys_root>/bus/pci/devices/<address>/
/// numa_node as torch reads it; -1 when unknown (the file says -1, or is missing).
std::map<std::string, int> ReadPciNumaNodes(const std::string& sys_root,
                                            const std::vector<std::string>& addresses);

/// The most CPUs a binding can name: a mask of this many bits is handed to sched_setaffinity.
inline constexpr int kMaxCpus = 8192;

/// The CPUs this process may run on (sched_getaffinity): bindings are made inside them.
absl::StatusOr<std::set<int>> AllowedCpus();

/// "0-3,8,10-11" -> {0,1,2,3,8,10,11}, the kernel's list format (cpulist).
absl::StatusOr<std::set<int>> ParseCpuList(const std::string& text);
/// {0,1,2,3,8} -> "0-3,8".
std::string FormatCpuList(const std::set<int>& cpus);

}  // namespace ddprun
