#include "node/accelerators.h"

#include "node/gpu_probe.h"

#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A sysfs tree under node/tests/testdata/sysfs (SOURCES.md says where each one comes from).
std::string Tree(const std::string& name) {
  return std::string(DDPRUN_SOURCE_DIR) + "/node/tests/testdata/sysfs/" + name;
}

std::vector<std::string> Addresses(const AcceleratorList& list) {
  std::vector<std::string> addresses;
  for (const Accelerator& device : list.devices) addresses.push_back(device.pci_address);
  return addresses;
}

std::vector<std::string> SelectValues(const AcceleratorList& list) {
  std::vector<std::string> values;
  for (const Accelerator& device : list.devices) values.push_back(device.select_value);
  return values;
}

// ---- AMD: which KFD nodes are GPUs, in which order, at which PCI address ----------------------

// The MI210 capture, GPU i in KFD node order (which is not PCI order).
const std::vector<std::string> kMi210 = {"0000:63:00.0", "0000:43:00.0", "0000:03:00.0",
                                         "0000:26:00.0", "0000:e3:00.0", "0000:c3:00.0",
                                         "0000:83:00.0", "0000:a3:00.0"};

std::vector<std::string> Mi210Addresses(const EnvMap& env) {
  return Addresses(FindAmdGpus(Tree("amd-mi210-xgmi"), env));
}

TEST(AmdGpus, Mi210NodesWithoutGpuIdFilesAreGpusBySimdCountInKfdNodeOrder) {
  const AcceleratorList list = FindAmdGpus(Tree("amd-mi210-xgmi"), {});
  EXPECT_EQ(list.vendor, AcceleratorVendor::kAmd);
  EXPECT_EQ(list.visibility_variable, "HIP_VISIBLE_DEVICES");
  EXPECT_THAT(Addresses(list), ElementsAreArray(kMi210));
  EXPECT_THAT(SelectValues(list), ElementsAre("0", "1", "2", "3", "4", "5", "6", "7"));
}

TEST(AmdGpus, Mi308xPartitionsAreGpusOnFunctionZeroOfTheirPhysicalGpu) {
  const AcceleratorList list = FindAmdGpus(Tree("amd-mi308x-4-partitions"), {});
  ASSERT_EQ(list.devices.size(), 32u);
  const std::vector<std::string> physical = {"0000:0a:00.0", "0000:80:00.0", "0000:a4:00.0",
                                             "0000:c8:00.0", "0001:0b:00.0", "0001:81:00.0",
                                             "0001:a5:00.0", "0001:c9:00.0"};
  // Nodes 2..33 in numeric order: node 10 (GPU 8) follows node 9, not node 1.
  for (size_t gpu = 0; gpu < 32; ++gpu) {
    EXPECT_EQ(list.devices[gpu].pci_address, physical[gpu / 4]) << "GPU " << gpu;
    EXPECT_EQ(list.devices[gpu].select_value, std::to_string(gpu));
  }
}

TEST(AmdGpus, Mi25CaptureWithoutADomainKeyIsInDomainZero) {
  const AcceleratorList list = FindAmdGpus(Tree("amd-mi25-no-domain"), {});
  EXPECT_THAT(Addresses(list), ElementsAre("0000:19:00.0", "0000:19:00.0"));
}

// Node 0: a Carrizo APU (CPU and GPU, no drm_render_minor key): a GPU. Node 1: a dGPU whose
// initialisation failed (drm_render_minor 0). Node 2: gpu_id unreadable. Node 4: a properties
// line of another shape before simd_count. Node 3: an MI210.
TEST(AmdGpus, SkipsNodesLibhsakmtWouldNotHandToRocr) {
  EXPECT_THAT(Addresses(FindAmdGpus(Tree("amd-edge-cases"), {})),
              ElementsAre("0000:00:01.0", "0000:43:00.0"));
}

TEST(AmdGpus, NoKfdTopologyIsNoAmdGpus) {
  for (const std::string& root : {Tree("no-such-tree"), Tree("intel-arc-with-igpu")}) {
    const AcceleratorList list = FindAmdGpus(root, {});
    EXPECT_EQ(list.vendor, AcceleratorVendor::kNone) << root;
    EXPECT_EQ(list.visibility_variable, "CUDA_VISIBLE_DEVICES");
    EXPECT_THAT(list.devices, IsEmpty());
  }
}

// ---- AMD: ROCR_VISIBLE_DEVICES (ROCr's RvdFilter) ---------------------------------------------

TEST(AmdGpus, RocrVisibleDevicesSetButEmptyShowsNoGpu) {
  const AcceleratorList list = FindAmdGpus(Tree("amd-mi210-xgmi"), {{"ROCR_VISIBLE_DEVICES", ""}});
  EXPECT_EQ(list.vendor, AcceleratorVendor::kAmd) << "the node has AMD GPUs, all hidden";
  EXPECT_EQ(list.visibility_variable, "HIP_VISIBLE_DEVICES");
  EXPECT_THAT(list.devices, IsEmpty());
  EXPECT_THAT(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "-1"}}), IsEmpty());
}

TEST(AmdGpus, RocrVisibleDevicesReordersAndRenumbersTheGpus) {
  const AcceleratorList list =
      FindAmdGpus(Tree("amd-mi210-xgmi"), {{"ROCR_VISIBLE_DEVICES", "3,0"}});
  EXPECT_THAT(Addresses(list), ElementsAre(kMi210[3], kMi210[0]));
  EXPECT_THAT(SelectValues(list), ElementsAre("0", "1"));
}

TEST(AmdGpus, RocrVisibleDevicesReadsIndicesAsStrtolInBaseZeroAfterTrimming) {
  EXPECT_THAT(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "0x2"}}), ElementsAre(kMi210[2]));
  EXPECT_THAT(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "0X2"}}), ElementsAre(kMi210[2]));
  EXPECT_THAT(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "07"}}), ElementsAre(kMi210[7]));
  EXPECT_THAT(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "010"}}), IsEmpty()) << "octal 8";
  EXPECT_THAT(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", " 1 ,\t2"}}),
              ElementsAre(kMi210[1], kMi210[2]));
  EXPECT_THAT(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "+1"}}), ElementsAre(kMi210[1]));
}

TEST(AmdGpus, RocrVisibleDevicesStopsAtTheFirstInvalidEntry) {
  EXPECT_THAT(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "1,9,2"}}), ElementsAre(kMi210[1]));
  EXPECT_THAT(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "1,x,2"}}), ElementsAre(kMi210[1]));
  EXPECT_THAT(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "1,,2"}}), ElementsAre(kMi210[1]));
  EXPECT_THAT(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "1,2x"}}), ElementsAre(kMi210[1]));
  EXPECT_THAT(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "1 2"}}), IsEmpty());
  EXPECT_THAT(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "2,-1,3"}}), ElementsAre(kMi210[2]));
  EXPECT_THAT(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "0,0,1"}}), ElementsAre(kMi210[0]))
      << "a repeated GPU ends the list in ROCr (HIP skips it)";
  EXPECT_THAT(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "99999999999999999999"}}), IsEmpty());
}

TEST(AmdGpus, RocrVisibleDevicesIgnoresTokensBeyondTheGpuCount) {
  EXPECT_EQ(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7,8"}}).size(), 8u);
  EXPECT_EQ(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "7,6,5,4,3,2,1,0,junk"}}).size(), 8u);
  EXPECT_THAT(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "5,"}}), ElementsAre(kMi210[5]));
}

std::vector<std::string> RocrExampleSelection(const std::string& rocr_visible_devices) {
  const AcceleratorList list = FindAmdGpus(Tree("amd-rocr-filter-examples"),
                                           {{"ROCR_VISIBLE_DEVICES", rocr_visible_devices}});
  std::vector<std::string> gpus;  // GPU i of the tree sits on bus 0x11 + i
  for (const std::string& address : Addresses(list)) {
    gpus.push_back(std::to_string(std::stoi(address.substr(5, 2), nullptr, 16) - 0x11));
  }
  return gpus;
}

// The examples of ROCr's amd_filter_device.h, on four GPUs with the UUIDs it assumes
// (GPU-BABABABABABABABA, GPU-ABBAABBAABBAABBA, GPU-BABAABBAABBABABA, GPU-ABBABABABABAABBA).
TEST(AmdGpus, RocrVisibleDevicesMatchesAUniqueUuidPrefixWithoutRegardToCase) {
  EXPECT_THAT(RocrExampleSelection("GPU-XX"), IsEmpty());
  EXPECT_THAT(RocrExampleSelection("3,GPU-BABABABABABABABA,4"), ElementsAre("3", "0"));
  // The header's comment promises GPU-1 and GPU-2 here; its code ends at the repeated GPU-1.
  EXPECT_THAT(RocrExampleSelection("1,GPU-ABBAABBAABBAABBA,GPU-XX"), ElementsAre("1"));
  EXPECT_THAT(RocrExampleSelection("3,GPU-BABAABBA,GPU-XX"), ElementsAre("3", "2"));
  EXPECT_THAT(RocrExampleSelection("gpu-babaabba"), ElementsAre("2"));
  EXPECT_THAT(RocrExampleSelection("GPU-BABA"), IsEmpty()) << "a prefix of GPU-0 and GPU-2";
  EXPECT_THAT(RocrExampleSelection("GPU-"), IsEmpty()) << "shorter than 5";
  EXPECT_THAT(RocrExampleSelection("GPU-BABABABABABABABA0"), IsEmpty()) << "longer than 20";
}

TEST(AmdGpus, RocrVisibleDevicesUuidOfAPartitionedGpuIsAmbiguous) {
  // All four partitions of the first MI308X share unique_id 598046273873802902.
  const AcceleratorList list = FindAmdGpus(Tree("amd-mi308x-4-partitions"),
                                           {{"ROCR_VISIBLE_DEVICES", "GPU-084cafeae17e7696"}});
  EXPECT_THAT(list.devices, IsEmpty());
  EXPECT_THAT(Mi210Addresses({{"ROCR_VISIBLE_DEVICES", "GPU-93BB3629C01AEA1C,1"}}),
              ElementsAre(kMi210[2], kMi210[1]));
}

// ---- AMD: HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES (HIP's Device::init) ---------------------

TEST(AmdGpus, HipVisibleDevicesSelectsAmongTheGpusRocrSurfaces) {
  const AcceleratorList list =
      FindAmdGpus(Tree("amd-mi210-xgmi"),
                  {{"ROCR_VISIBLE_DEVICES", "4,5,6,7"}, {"HIP_VISIBLE_DEVICES", "1,3"}});
  EXPECT_THAT(Addresses(list), ElementsAre(kMi210[5], kMi210[7]));
  // A worker that inherits ROCR_VISIBLE_DEVICES sees these as HIP_VISIBLE_DEVICES=1 and =3.
  EXPECT_THAT(SelectValues(list), ElementsAre("1", "3"));
}

std::vector<std::string> HipSelection(const std::string& hip_visible_devices) {
  return Mi210Addresses(
      {{"ROCR_VISIBLE_DEVICES", "0,1,2,3"}, {"HIP_VISIBLE_DEVICES", hip_visible_devices}});
}

TEST(AmdGpus, HipVisibleDevicesSkipsRepeatsAndStopsAtTheFirstInvalidEntry) {
  EXPECT_THAT(HipSelection("2,0"), ElementsAre(kMi210[2], kMi210[0]));
  EXPECT_THAT(HipSelection("1,1,3"), ElementsAre(kMi210[1], kMi210[3]));
  EXPECT_THAT(HipSelection("1,7,2"), ElementsAre(kMi210[1])) << "7 is past the 4 ROCr shows";
  EXPECT_THAT(HipSelection("1, 2"), ElementsAre(kMi210[1]));
  EXPECT_THAT(HipSelection("01"), IsEmpty());
  EXPECT_THAT(HipSelection("+1"), IsEmpty());
  EXPECT_THAT(HipSelection("0x1"), IsEmpty());
  EXPECT_THAT(HipSelection("-1"), IsEmpty());
  EXPECT_THAT(HipSelection("0,1,"), ElementsAre(kMi210[0], kMi210[1]));
  EXPECT_THAT(HipSelection("0,,1"), ElementsAre(kMi210[0]));
  EXPECT_THAT(HipSelection(","), IsEmpty());
}

TEST(AmdGpus, HipFallsBackToCudaVisibleDevicesWhenHipVisibleDevicesIsEmpty) {
  EXPECT_THAT(Mi210Addresses({{"CUDA_VISIBLE_DEVICES", "3"}}), ElementsAre(kMi210[3]));
  EXPECT_THAT(Mi210Addresses({{"HIP_VISIBLE_DEVICES", ""}, {"CUDA_VISIBLE_DEVICES", "2"}}),
              ElementsAre(kMi210[2]));
  EXPECT_THAT(Mi210Addresses({{"HIP_VISIBLE_DEVICES", "0"}, {"CUDA_VISIBLE_DEVICES", "3"}}),
              ElementsAre(kMi210[0]));
  EXPECT_THAT(Mi210Addresses({{"HIP_VISIBLE_DEVICES", ""}, {"CUDA_VISIBLE_DEVICES", ""}}),
              ElementsAreArray(kMi210))
      << "empty is no filter in HIP, unlike ROCR_VISIBLE_DEVICES";
}

TEST(AmdGpus, HipVisibleDevicesFindsALowerCaseUuidSubstring) {
  // GPU 5 of the MI210 capture is GPU-a3781b5a10fcf54a.
  EXPECT_THAT(Mi210Addresses({{"HIP_VISIBLE_DEVICES", "GPU-a3781b5a10fcf54a,0"}}),
              ElementsAre(kMi210[5], kMi210[0]));
  EXPECT_THAT(Mi210Addresses({{"HIP_VISIBLE_DEVICES", "GPU-a3781b"}}), ElementsAre(kMi210[5]));
  EXPECT_THAT(Mi210Addresses({{"HIP_VISIBLE_DEVICES", "GPU-A3781B5A10FCF54A"}}), IsEmpty())
      << "HIP compares case-sensitively against lower-case hex";
  // After ROCr's filter the UUID names a position in ROCr's list.
  const AcceleratorList list = FindAmdGpus(
      Tree("amd-mi210-xgmi"),
      {{"ROCR_VISIBLE_DEVICES", "4,5"}, {"HIP_VISIBLE_DEVICES", "GPU-a3781b5a10fcf54a"}});
  EXPECT_THAT(Addresses(list), ElementsAre(kMi210[5]));
  EXPECT_THAT(SelectValues(list), ElementsAre("1"));
  // HIP names a GPU without a unique_id GPU-XX; ROCr matches no UUID to it.
  EXPECT_THAT(Addresses(FindAmdGpus(Tree("amd-edge-cases"), {{"HIP_VISIBLE_DEVICES", "GPU-XX"}})),
              ElementsAre("0000:00:01.0"));
  EXPECT_THAT(Addresses(FindAmdGpus(Tree("amd-edge-cases"), {{"ROCR_VISIBLE_DEVICES", "GPU-XX"}})),
              IsEmpty());
}

// ---- Intel: which cards, how many devices each, in which order --------------------------------

TEST(IntelGpus, IntegratedGpuOfAProcfsCaptureIsFoundThroughItsUevent) {
  // card0 is an AMD Vega 64; card1 has no vendor file, only DRIVER= and PCI_ID= in uevent.
  const AcceleratorList list = FindIntelGpus(Tree("intel-kabylake-procfs"), {});
  EXPECT_EQ(list.vendor, AcceleratorVendor::kIntel);
  EXPECT_EQ(list.visibility_variable, "ZE_AFFINITY_MASK");
  EXPECT_THAT(Addresses(list), ElementsAre("0000:00:02.0"));
  EXPECT_THAT(SelectValues(list), ElementsAre("0"));
  EXPECT_TRUE(list.integrated);  // xpu counts it; gpu and auto do not (FindAccelerators)
}

TEST(IntelGpus, DiscreteGpusHideTheIntegratedOne) {
  // Level Zero numbers the integrated GPU 0 and the Arc A770 1; torch.xpu shows only the A770.
  // The connector entry card1-DP-1 is not a card.
  const AcceleratorList list = FindIntelGpus(Tree("intel-arc-with-igpu"), {});
  EXPECT_THAT(Addresses(list), ElementsAre("0000:03:00.0"));
  EXPECT_THAT(SelectValues(list), ElementsAre("1"));
  EXPECT_FALSE(list.integrated);
}

TEST(IntelGpus, IntegratedGpuCountsWhenTheMaskHidesEveryDiscreteOne) {
  const AcceleratorList list =
      FindIntelGpus(Tree("intel-arc-with-igpu"), {{"ZE_AFFINITY_MASK", "0"}});
  EXPECT_THAT(Addresses(list), ElementsAre("0000:00:02.0"));
  EXPECT_THAT(SelectValues(list), ElementsAre("0"));
}

TEST(IntelGpus, DataCenterGpuMaxDefaultsToOneDevicePerTileInPciOrder) {
  // card2 (0000:29:00.0) comes before card1 (0000:9a:00.0); card0 is the BMC's ASPEED VGA.
  const AcceleratorList list = FindIntelGpus(Tree("intel-max1550-xe"), {});
  EXPECT_THAT(Addresses(list),
              ElementsAre("0000:29:00.0", "0000:29:00.0", "0000:9a:00.0", "0000:9a:00.0"));
  EXPECT_THAT(SelectValues(list), ElementsAre("0", "1", "2", "3"));
}

TEST(IntelGpus, FlatDeviceHierarchyIsReadCaseSensitively) {
  const std::string root = Tree("intel-max1550-xe");
  const AcceleratorList composite =
      FindIntelGpus(root, {{"ZE_FLAT_DEVICE_HIERARCHY", "COMPOSITE"}});
  EXPECT_THAT(Addresses(composite), ElementsAre("0000:29:00.0", "0000:9a:00.0"));
  EXPECT_THAT(SelectValues(composite), ElementsAre("0", "1"));
  EXPECT_EQ(FindIntelGpus(root, {{"ZE_FLAT_DEVICE_HIERARCHY", "FLAT"}}).devices.size(), 4u);
  EXPECT_EQ(FindIntelGpus(root, {{"ZE_FLAT_DEVICE_HIERARCHY", "COMBINED"}}).devices.size(), 4u);
  EXPECT_EQ(FindIntelGpus(root, {{"ZE_FLAT_DEVICE_HIERARCHY", "composite"}}).devices.size(), 4u)
      << "not one of NEO's exact strings: the platform default, FLAT";
}

TEST(IntelGpus, I915GtsAreTilesOnlyOnDataCenterGpuMax) {
  EXPECT_THAT(SelectValues(FindIntelGpus(Tree("intel-max1550-i915"), {})), ElementsAre("0", "1"));
  // On Meteor Lake gt/gt1 is the media GT: one device, whatever the hierarchy.
  EXPECT_THAT(SelectValues(FindIntelGpus(Tree("intel-meteorlake-i915"), {})), ElementsAre("0"));
  EXPECT_THAT(SelectValues(FindIntelGpus(Tree("intel-meteorlake-i915"),
                                         {{"ZE_FLAT_DEVICE_HIERARCHY", "FLAT"}})),
              ElementsAre("0"));
}

std::vector<std::string> MaskedMax1550(const std::string& mask, const std::string& hierarchy) {
  EnvMap env = {{"ZE_AFFINITY_MASK", mask}};
  if (!hierarchy.empty()) env["ZE_FLAT_DEVICE_HIERARCHY"] = hierarchy;
  return SelectValues(FindIntelGpus(Tree("intel-max1550-xe"), env));
}

TEST(IntelGpus, AffinityMaskInFlatHierarchyNumbersTilesAcrossCards) {
  EXPECT_THAT(MaskedMax1550("0,2", ""), ElementsAre("0", "2"));
  EXPECT_THAT(MaskedMax1550("3,1", ""), ElementsAre("1", "3")) << "driver order, not mask order";
  EXPECT_THAT(MaskedMax1550("1,1", ""), ElementsAre("1"));
  EXPECT_THAT(MaskedMax1550("0.1", ""), IsEmpty()) << "X.Y is not valid in FLAT";
  EXPECT_THAT(MaskedMax1550("4", ""), IsEmpty());
  EXPECT_THAT(MaskedMax1550("4,0", ""), ElementsAre("0")) << "out of range is skipped";
  EXPECT_THAT(MaskedMax1550("1abc", ""), ElementsAre("1")) << "stoul reads leading digits";
  EXPECT_THAT(MaskedMax1550("x,2", ""), ElementsAre("2"));
  EXPECT_THAT(MaskedMax1550("0x3", ""), ElementsAre("3"));
  EXPECT_THAT(MaskedMax1550(" 2", ""), ElementsAre("2"));
  EXPECT_THAT(MaskedMax1550("-1", ""), IsEmpty());
  EXPECT_THAT(MaskedMax1550("default", ""), ElementsAre("0", "1", "2", "3"));
  EXPECT_THAT(MaskedMax1550("", ""), ElementsAre("0", "1", "2", "3"));
  const AcceleratorList none =
      FindIntelGpus(Tree("intel-max1550-xe"), {{"ZE_AFFINITY_MASK", "0.1"}});
  EXPECT_EQ(none.vendor, AcceleratorVendor::kIntel) << "the node has Intel GPUs, all masked";
}

TEST(IntelGpus, AffinityMaskInCompositeHierarchySelectsCardsAndTheirTiles) {
  EXPECT_THAT(MaskedMax1550("1", "COMPOSITE"), ElementsAre("1"));
  EXPECT_THAT(MaskedMax1550("1.1,1.2", "COMPOSITE"), ElementsAre("1.1"))
      << "card 1 with only its tile 1; tile 2 does not exist";
  EXPECT_THAT(MaskedMax1550("0.0,0.1", "COMPOSITE"), ElementsAre("0"));
  EXPECT_THAT(MaskedMax1550("1.0,0", "COMPOSITE"), ElementsAre("0", "1.0"));
  EXPECT_THAT(MaskedMax1550("2", "COMPOSITE"), IsEmpty());
  EXPECT_THAT(MaskedMax1550("0.1.0", "COMPOSITE"), IsEmpty());
  const AcceleratorList list =
      FindIntelGpus(Tree("intel-max1550-xe"),
                    {{"ZE_AFFINITY_MASK", "1.1"}, {"ZE_FLAT_DEVICE_HIERARCHY", "COMPOSITE"}});
  EXPECT_THAT(Addresses(list), ElementsAre("0000:9a:00.0"));
}

TEST(IntelGpus, NoIntelDrmCardIsNoIntelGpus) {
  for (const std::string& root : {Tree("no-such-tree"), Tree("amd-mi210-xgmi")}) {
    const AcceleratorList list = FindIntelGpus(root, {});
    EXPECT_EQ(list.vendor, AcceleratorVendor::kNone) << root;
    EXPECT_EQ(list.visibility_variable, "CUDA_VISIBLE_DEVICES");
    EXPECT_THAT(list.devices, IsEmpty());
  }
}

// Live sysfs: class/drm/cardN links to the PCI device's drm/cardN, whose device and driver are
// symlinks; there is no uevent to fall back on here.
TEST(IntelGpus, ReadsVendorDriverAndAddressThroughSysfsSymlinks) {
  namespace fs = std::filesystem;
  testing::TempDir sys;
  const fs::path root = sys.path();
  fs::create_directories(root / "bus/pci/drivers/xe");
  fs::create_directories(root / "class/drm");
  const fs::path pci = root / "devices/pci0000:00/0000:00:01.0/0000:3a:00.0";
  fs::create_directories(pci / "drm/card0");
  fs::create_directories(pci / "tile0");
  fs::create_directories(pci / "tile1");
  sys.Write("devices/pci0000:00/0000:00:01.0/0000:3a:00.0/vendor", "0x8086\n");
  sys.Write("devices/pci0000:00/0000:00:01.0/0000:3a:00.0/device", "0x0bd6\n");
  fs::create_directory_symlink("../../../../bus/pci/drivers/xe", pci / "driver");
  fs::create_directory_symlink("../../../0000:3a:00.0", pci / "drm/card0/device");
  fs::create_directory_symlink("../../devices/pci0000:00/0000:00:01.0/0000:3a:00.0/drm/card0",
                               root / "class/drm/card0");
  const AcceleratorList list = FindIntelGpus(sys.path(), {});
  EXPECT_THAT(Addresses(list), ElementsAre("0000:3a:00.0", "0000:3a:00.0"));
  EXPECT_THAT(SelectValues(list), ElementsAre("0", "1"));
}

}  // namespace
}  // namespace ddprun

namespace ddprun {
namespace {

AcceleratorList Nvidia(int gpus) {
  AcceleratorList list;
  list.vendor = AcceleratorVendor::kNvidia;
  for (int i = 0; i < gpus; ++i) list.devices.push_back({"", std::to_string(i)});
  return list;
}

TEST(VirtualDevices, NvidiaTakesTheInheritedListsEntriesAsTorchrunDoes) {
  EXPECT_THAT(*VirtualDeviceValues(Nvidia(2), {{"CUDA_VISIBLE_DEVICES", "GPU-aa, 5"}}, 2),
              ElementsAre("GPU-aa", "5"));
  EXPECT_THAT(*VirtualDeviceValues(Nvidia(8), {}, 3), ElementsAre("0", "1", "2"));
}

TEST(VirtualDevices, FewerDevicesThanLocalRanksIsAnError) {
  absl::StatusOr<std::vector<std::string>> values =
      VirtualDeviceValues(Nvidia(2), {{"CUDA_VISIBLE_DEVICES", "0,1"}}, 3);
  ASSERT_FALSE(values.ok());
  EXPECT_EQ(values.status().message(),
            "--virtual-local-rank: 2 devices are visible (CUDA_VISIBLE_DEVICES='0,1') for 3 "
            "local ranks; make one visible per local rank, or lower --nproc-per-node");
  // No list: the GPUs the probe found.
  values = VirtualDeviceValues(Nvidia(1), {}, 2);
  ASSERT_FALSE(values.ok());
  EXPECT_THAT(std::string(values.status().message()), HasSubstr("1 devices are visible (found"));
  // An empty list shows no device at all.
  EXPECT_FALSE(VirtualDeviceValues(Nvidia(2), {{"CUDA_VISIBLE_DEVICES", ""}}, 2).ok());
}

TEST(VirtualDevices, WithoutAcceleratorsTheLocalRankIsTheDeviceAsInTorchrun) {
  EXPECT_THAT(*VirtualDeviceValues(AcceleratorList{}, {}, 2), ElementsAre("0", "1"));
}

TEST(VirtualDevices, AmdAndIntelTakeEachDevicesOwnSelector) {
  const AcceleratorList amd =
      FindAmdGpus(Tree("amd-mi210-xgmi"),
                  {{"ROCR_VISIBLE_DEVICES", "4,5,6,7"}, {"HIP_VISIBLE_DEVICES", "3,1"}});
  EXPECT_EQ(amd.visibility_variable, "HIP_VISIBLE_DEVICES");
  EXPECT_THAT(*VirtualDeviceValues(amd, {}, 2), ElementsAre("3", "1"));
  EXPECT_FALSE(VirtualDeviceValues(amd, {}, 3).ok());
}

TEST(NormalizePciAddress, GivesSysfsSpelling) {
  EXPECT_EQ(NormalizePciAddress("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(NormalizePciAddress("0001:C1:1f.7"), "0001:c1:1f.7");
  EXPECT_EQ(NormalizePciAddress("not an address"), "");
  EXPECT_EQ(NormalizePciAddress(""), "");
}

}  // namespace
}  // namespace ddprun
