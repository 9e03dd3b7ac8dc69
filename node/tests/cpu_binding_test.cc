// --numa-binding and --cpu-affinity on the topologies of real servers (testdata/topology):
// each mode's CPUs for each local rank, as torch's binding.py computes them.

#include "node/cpu_binding.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "node/cpu_topology.h"

namespace ddprun {
namespace {

CpuTopology Load(const std::string& name) {
  absl::StatusOr<CpuTopology> topology =
      LoadCpuTopology(std::string(DDPRUN_SOURCE_DIR) + "/node/tests/testdata/topology/" + name);
  EXPECT_TRUE(topology.ok()) << topology.status();
  return topology.ok() ? *topology : CpuTopology{};
}

std::set<int> Every(const CpuTopology& topology) {
  std::set<int> cpus;
  for (const CpuTopology::Cpu& cpu : topology.cpus) cpus.insert(cpu.id);
  return cpus;
}

// Each local rank's CPUs as a cpulist, and its preferred node.
std::vector<std::string> Plan(NumaBinding mode, const CpuTopology& topology,
                              const std::vector<std::string>& gpus, int nproc,
                              std::set<int> allowed = {}) {
  CpuBindingSettings settings;
  settings.numa = mode;
  if (allowed.empty()) allowed = Every(topology);
  absl::StatusOr<std::vector<WorkerBinding>> plan =
      PlanCpuBindings(settings, topology, allowed, gpus, nproc);
  if (!plan.ok()) return {std::string(plan.status().message())};
  std::vector<std::string> out;
  for (const WorkerBinding& b : *plan) {
    out.push_back(FormatCpuList(b.cpus) + " @" + std::to_string(b.preferred_node));
  }
  return out;
}

const std::vector<std::string> kG4dnGpus = {"0000:18:00.0", "0000:19:00.0", "0000:35:00.0",
                                            "0000:36:00.0", "0000:e7:00.0", "0000:e8:00.0",
                                            "0000:f4:00.0", "0000:f5:00.0"};
const std::vector<std::string> kCoronaP2Gpus = {"0000:03:00.0", "0000:27:00.0", "0000:43:00.0",
                                                "0000:63:00.0", "0000:83:00.0", "0000:a3:00.0",
                                                "0000:c3:00.0", "0000:e3:00.0"};

TEST(CpuTopology, ReadsCpusNodesCachesAndGpuLocalityFromHwlocXml) {
  const CpuTopology g4dn = Load("g4dnmetal.xml");
  EXPECT_EQ(g4dn.cpus.size(), 96u);
  EXPECT_EQ(g4dn.numa_nodes, (std::set<int>{0, 1}));
  EXPECT_EQ(g4dn.cpus[50].core, 2);  // PU 50 is the hyperthread of PU 2
  EXPECT_EQ(g4dn.cpus[50].package, 0);
  EXPECT_EQ(g4dn.cpus[72].package, 1);
  for (size_t i = 0; i < kG4dnGpus.size(); ++i) {
    EXPECT_EQ(g4dn.pci_numa.at(kG4dnGpus[i]), i < 4 ? 0 : 1) << kG4dnGpus[i];
  }
  const CpuTopology corona = Load("epyc-corona.xml");
  EXPECT_EQ(corona.numa_nodes.size(), 8u);
  EXPECT_EQ(corona.pci_numa.at("0000:53:00.0"), 5);
  EXPECT_EQ(corona.cpus[4].cache, 3);  // CCX 3-5,51-53: three cores under one L3
}

TEST(CpuTopology, ReadsGpusAttachedToACacheRatherThanANode) {
  const CpuTopology tioga = Load("eas-tioga.xml");
  EXPECT_EQ(tioga.pci_numa.at("0000:c1:00.0"), 3);
  EXPECT_EQ(tioga.pci_numa.at("0000:d1:00.0"), 0);
}

TEST(CpuTopology, ReadsAcceleratorsNodesFromSysfsAsTorchDoes) {
  // MI210 server capture (testdata/sysfs/SOURCES.md): GPUs on both sockets' nodes.
  const std::string root =
      std::string(DDPRUN_SOURCE_DIR) + "/node/tests/testdata/sysfs/amd-mi210-xgmi";
  const std::map<std::string, int> nodes =
      ReadPciNumaNodes(root, {"0000:63:00.0", "0000:e3:00.0", "0000:99:00.0", ""});
  EXPECT_EQ(nodes.at("0000:63:00.0"), 0);
  EXPECT_EQ(nodes.at("0000:e3:00.0"), 1);
  EXPECT_EQ(nodes.at("0000:99:00.0"), -1);  // no such device: unknown
  EXPECT_EQ(nodes.count(""), 0u);
}

TEST(CpuTopology, ThisMachinesTopologyHasItsAllowedCpus) {
  absl::StatusOr<CpuTopology> topology = LoadCpuTopology();
  ASSERT_TRUE(topology.ok()) << topology.status();
  std::set<int> ids;
  for (const CpuTopology::Cpu& cpu : topology->cpus) ids.insert(cpu.id);
  const absl::StatusOr<std::set<int>> allowed = AllowedCpus();
  ASSERT_TRUE(allowed.ok());
  for (int cpu : *allowed) EXPECT_EQ(ids.count(cpu), 1u) << cpu;
  EXPECT_FALSE(topology->numa_nodes.empty());
}

TEST(CpuTopology, AnUnreadableXmlNamesTheFile) {
  absl::StatusOr<CpuTopology> topology = LoadCpuTopology("/nonexistent/machine.xml");
  ASSERT_FALSE(topology.ok());
  EXPECT_NE(topology.status().message().find("/nonexistent/machine.xml"), std::string::npos);
}

TEST(NumaBinding, NodeAndSocketOnATwoSocketEightGpuServer) {
  const CpuTopology g4dn = Load("g4dnmetal.xml");
  const std::vector<std::string> node0(4, "0-23,48-71 @0"), node1(4, "24-47,72-95 @1");
  std::vector<std::string> expected = node0;
  expected.insert(expected.end(), node1.begin(), node1.end());
  EXPECT_EQ(Plan(NumaBinding::kNode, g4dn, kG4dnGpus, 8), expected);
  EXPECT_EQ(Plan(NumaBinding::kSocket, g4dn, kG4dnGpus, 8), expected);
}

TEST(NumaBinding, ExclusiveSplitsEachNodesCoresOverItsGpusWithTheirHyperthreads) {
  EXPECT_EQ(Plan(NumaBinding::kExclusive, Load("g4dnmetal.xml"), kG4dnGpus, 8),
            (std::vector<std::string>{"0-5,48-53 @0", "6-11,54-59 @0", "12-17,60-65 @0",
                                      "18-23,66-71 @0", "24-29,72-77 @1", "30-35,78-83 @1",
                                      "36-41,84-89 @1", "42-47,90-95 @1"}));
}

TEST(NumaBinding, ExclusiveCountsEveryVisibleGpuOnTheNodeNotOnlyTheJobs) {
  // Two local ranks on an 8-GPU box: each still gets a quarter of its node, as in torch.
  EXPECT_EQ(Plan(NumaBinding::kExclusive, Load("g4dnmetal.xml"), kG4dnGpus, 2),
            (std::vector<std::string>{"0-5,48-53 @0", "6-11,54-59 @0"}));
}

TEST(NumaBinding, ExclusiveGivesTheFirstRanksTheCoresLeftOver) {
  // 24 cores for 5 GPUs: 5, 5, 5, 5, 4.
  const std::vector<std::string> five(kG4dnGpus.begin(), kG4dnGpus.begin() + 4);
  std::vector<std::string> gpus = five;
  gpus.push_back("0000:18:00.0");  // a fifth device on node 0 (the same address: a MIG-like split)
  EXPECT_EQ(Plan(NumaBinding::kExclusive, Load("g4dnmetal.xml"), gpus, 5),
            (std::vector<std::string>{"0-4,48-52 @0", "5-9,53-57 @0", "10-14,58-62 @0",
                                      "15-19,63-67 @0", "20-23,68-71 @0"}));
}

TEST(NumaBinding, ADgxA100ClassBoxGivesEachA100ItsShareOfItsSocket) {
  // AWS p4d.24xlarge: 8 A100 SXM4 behind NVSwitches, 4 per socket, one NUMA node per socket.
  const CpuTopology p4d = Load("aws-p4d.xml");
  const std::vector<std::string> gpus = {"0000:10:1c.0", "0000:10:1d.0", "0000:20:1c.0",
                                         "0000:20:1d.0", "0000:90:1c.0", "0000:90:1d.0",
                                         "0000:a0:1c.0", "0000:a0:1d.0"};
  EXPECT_EQ(Plan(NumaBinding::kExclusive, p4d, gpus, 8),
            (std::vector<std::string>{"0-5,48-53 @0", "6-11,54-59 @0", "12-17,60-65 @0",
                                      "18-23,66-71 @0", "24-29,72-77 @1", "30-35,78-83 @1",
                                      "36-41,84-89 @1", "42-47,90-95 @1"}));
  for (NumaBinding mode : {NumaBinding::kNode, NumaBinding::kSocket, NumaBinding::kCoreComplex}) {
    const std::vector<std::string> plan = Plan(mode, p4d, gpus, 8);
    EXPECT_EQ(plan[0], "0-23,48-71 @0") << NumaBindingName(mode);
    EXPECT_EQ(plan[7], "24-47,72-95 @1") << NumaBindingName(mode);
  }
}

TEST(NumaBinding, CoreComplexGivesEachGpuOneL3OfItsNode) {
  EXPECT_EQ(Plan(NumaBinding::kCoreComplex, Load("epyc-corona-p2.xml"), kCoronaP2Gpus, 8),
            (std::vector<std::string>{"0-2,48-50 @0", "3-5,51-53 @0", "6-8,54-56 @0",
                                      "9-11,57-59 @0", "24-26,72-74 @1", "27-29,75-77 @1",
                                      "30-32,78-80 @1", "33-35,81-83 @1"}));
}

TEST(NumaBinding, CoreComplexWrapsAroundWhenGpusOutnumberComplexes) {
  // One L3 per package on the Xeons: every GPU of a node gets the node's only complex.
  EXPECT_EQ(Plan(NumaBinding::kCoreComplex, Load("g4dnmetal.xml"), kG4dnGpus, 8)[3],
            "0-23,48-71 @0");
}

TEST(NumaBinding, EightNodesPerMachineLikeADgxA100InNps4) {
  const CpuTopology corona = Load("epyc-corona.xml");
  const std::vector<std::string> gpus = {"0000:13:00.0", "0000:23:00.0", "0000:53:00.0",
                                         "0000:73:00.0"};
  EXPECT_EQ(Plan(NumaBinding::kNode, corona, gpus, 4),
            (std::vector<std::string>{"6-11,54-59 @1", "12-17,60-65 @2", "30-35,78-83 @5",
                                      "42-47,90-95 @7"}));
  EXPECT_EQ(Plan(NumaBinding::kSocket, corona, gpus, 4),
            (std::vector<std::string>{"0-23,48-71 @1", "0-23,48-71 @2", "24-47,72-95 @5",
                                      "24-47,72-95 @7"}));
  EXPECT_EQ(Plan(NumaBinding::kCoreComplex, corona, gpus, 4),
            (std::vector<std::string>{"6-8,54-56 @1", "12-14,60-62 @2", "30-32,78-80 @5",
                                      "42-44,90-92 @7"}));
}

TEST(NumaBinding, GpusUnderAnL3CacheBindToTheirNode) {
  const std::vector<std::string> gpus = {"0000:c1:00.0", "0000:c6:00.0", "0000:c9:00.0",
                                         "0000:ce:00.0", "0000:d1:00.0", "0000:d6:00.0",
                                         "0000:d9:00.0", "0000:de:00.0"};
  EXPECT_EQ(Plan(NumaBinding::kExclusive, Load("eas-tioga.xml"), gpus, 8),
            (std::vector<std::string>{"48-55,112-119 @3", "56-63,120-127 @3", "16-23,80-87 @1",
                                      "24-31,88-95 @1", "0-7,64-71 @0", "8-15,72-79 @0",
                                      "32-39,96-103 @2", "40-47,104-111 @2"}));
}

TEST(NumaBinding, WithoutAcceleratorsLocalRanksTakeTheNodesInTurn) {
  EXPECT_EQ(Plan(NumaBinding::kNode, Load("g4dnmetal.xml"), {}, 4),
            (std::vector<std::string>{"0-23,48-71 @0", "24-47,72-95 @1", "0-23,48-71 @0",
                                      "24-47,72-95 @1"}));
  // exclusive: the ranks on a node share it as GPUs would.
  EXPECT_EQ(Plan(NumaBinding::kExclusive, Load("g4dnmetal.xml"), {}, 4),
            (std::vector<std::string>{"0-11,48-59 @0", "24-35,72-83 @1", "12-23,60-71 @0",
                                      "36-47,84-95 @1"}));
}

TEST(NumaBinding, AGpuOfUnknownLocalityIsSpreadLikeNoGpu) {
  EXPECT_EQ(Plan(NumaBinding::kNode, Load("g4dnmetal.xml"), {"0000:77:00.0", "0000:78:00.0"}, 2),
            (std::vector<std::string>{"0-23,48-71 @0", "24-47,72-95 @1"}));
}

TEST(NumaBinding, StaysInsideTheCpusDdprunMayUse) {
  // A Slurm job given half of each socket.
  std::set<int> allowed;
  for (int cpu = 0; cpu < 12; ++cpu) allowed.insert(cpu);
  for (int cpu = 24; cpu < 36; ++cpu) allowed.insert(cpu);
  EXPECT_EQ(Plan(NumaBinding::kNode, Load("g4dnmetal.xml"), kG4dnGpus, 8, allowed)[7], "24-35 @1");
  EXPECT_EQ(Plan(NumaBinding::kExclusive, Load("g4dnmetal.xml"), kG4dnGpus, 8, allowed)[1],
            "3-5 @0");
}

TEST(NumaBinding, ANodeWithNoAllowedCpuIsAnErrorThatSaysWhich) {
  const std::vector<std::string> plan =
      Plan(NumaBinding::kNode, Load("g4dnmetal.xml"), kG4dnGpus, 8, {0, 1, 2, 3});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_NE(plan[0].find("local rank 4's accelerator 0000:e7:00.0 is on NUMA node 1"),
            std::string::npos)
      << plan[0];
  EXPECT_NE(plan[0].find("0-3"), std::string::npos);
}

TEST(NumaBinding, ExclusiveWithMoreGpusThanCoresIsAnError) {
  const std::vector<std::string> plan =
      Plan(NumaBinding::kExclusive, Load("g4dnmetal.xml"), kG4dnGpus, 8, {0, 1, 24, 25});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_NE(plan[0].find("NUMA node 0 has 2 allowed physical cores for 4"), std::string::npos)
      << plan[0];
}

TEST(CpuAffinity, AutoSplitsTheAllowedCoresEvenly) {
  CpuBindingSettings settings;
  settings.auto_split = true;
  const CpuTopology g4dn = Load("g4dnmetal.xml");
  absl::StatusOr<std::vector<WorkerBinding>> plan =
      PlanCpuBindings(settings, g4dn, Every(g4dn), {}, 3);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(FormatCpuList((*plan)[0].cpus), "0-15,48-63");
  EXPECT_EQ((*plan)[0].preferred_node, 0);
  EXPECT_EQ(FormatCpuList((*plan)[1].cpus), "16-31,64-79");
  EXPECT_EQ((*plan)[1].preferred_node, -1);  // across both sockets: left to the kernel
  EXPECT_EQ(FormatCpuList((*plan)[2].cpus), "32-47,80-95");
}

TEST(CpuAffinity, ListsMustLieInsideTheAllowedCpus) {
  CpuBindingSettings settings;
  settings.lists = {{0, 1}, {2, 3, 200}};
  const CpuTopology g4dn = Load("g4dnmetal.xml");
  absl::StatusOr<std::vector<WorkerBinding>> plan =
      PlanCpuBindings(settings, g4dn, Every(g4dn), {}, 2);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("local rank 1's CPUs 200 are not allowed"),
            std::string::npos)
      << plan.status();
  settings.lists = {{0, 1}, {24, 25}};
  plan = PlanCpuBindings(settings, g4dn, Every(g4dn), {}, 2);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ((*plan)[1].preferred_node, 1);
  // As the launcher plans them: without reading the topology, CPUs only.
  plan = PlanCpuBindings(settings, CpuTopology{}, {0, 1, 24, 25}, {}, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)[1].cpus, (std::set<int>{24, 25}));
  EXPECT_EQ((*plan)[1].preferred_node, -1);
}

TEST(CpuList, ParsesAndFormatsTheKernelsFormat) {
  EXPECT_EQ(*ParseCpuList("0-3,8,10-11"), (std::set<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_FALSE(ParseCpuList("").ok());
  EXPECT_FALSE(ParseCpuList("3-1").ok());
  EXPECT_FALSE(ParseCpuList("a").ok());
  EXPECT_FALSE(ParseCpuList("1,,2").ok());
  EXPECT_FALSE(ParseCpuList("100000").ok());
}

}  // namespace
}  // namespace ddprun
