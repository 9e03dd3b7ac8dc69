#include "node/gpu_probe.h"

#include "gtest/gtest.h"

namespace ddprun {
namespace {

TEST(ApplyCudaVisibleDevicesTest, UnsetMeansEveryPhysicalDevice) {
  EXPECT_EQ(ApplyCudaVisibleDevices(std::nullopt, 0), 0);
  EXPECT_EQ(ApplyCudaVisibleDevices(std::nullopt, 4), 4);
}

TEST(ApplyCudaVisibleDevicesTest, EmptyHidesEverything) {
  EXPECT_EQ(ApplyCudaVisibleDevices(std::string(""), 4), 0);
}

TEST(ApplyCudaVisibleDevicesTest, ListOfIndices) {
  EXPECT_EQ(ApplyCudaVisibleDevices(std::string("0,1"), 4), 2);
  EXPECT_EQ(ApplyCudaVisibleDevices(std::string("3"), 4), 1);
  EXPECT_EQ(ApplyCudaVisibleDevices(std::string("0, 2 ,3"), 4), 3);
}

TEST(ApplyCudaVisibleDevicesTest, StopsAtTheFirstInvalidEntry) {
  EXPECT_EQ(ApplyCudaVisibleDevices(std::string("1,7"), 4), 1);
  EXPECT_EQ(ApplyCudaVisibleDevices(std::string("1,7,2"), 4), 1);
  EXPECT_EQ(ApplyCudaVisibleDevices(std::string("7,1"), 4), 0);
  EXPECT_EQ(ApplyCudaVisibleDevices(std::string("0,x,1"), 4), 1);
}

TEST(ApplyCudaVisibleDevicesTest, NegativeIndexHidesEverything) {
  EXPECT_EQ(ApplyCudaVisibleDevices(std::string("-1"), 4), 0);
}

TEST(ApplyCudaVisibleDevicesTest, UuidsCount) {
  EXPECT_EQ(ApplyCudaVisibleDevices(std::string("GPU-abc"), 4), 1);
  EXPECT_EQ(ApplyCudaVisibleDevices(std::string("GPU-abc,MIG-def"), 4), 2);
}

TEST(ApplyCudaVisibleDevicesTest, NeverMoreThanPhysical) {
  EXPECT_EQ(ApplyCudaVisibleDevices(std::string("GPU-a,GPU-b,GPU-c"), 2), 2);
  EXPECT_EQ(ApplyCudaVisibleDevices(std::string("GPU-a"), 0), 0);
}

TEST(ApplyCudaVisibleDevicesTest, RepeatedIndexHidesEverythingAsPyTorchReadsIt) {
  EXPECT_EQ(ApplyCudaVisibleDevices(std::string("0,0"), 4), 0);
}

TEST(ApplyCudaVisibleDevicesTest, ListEndsWhereTheKindOfEntryChanges) {
  EXPECT_EQ(ApplyCudaVisibleDevices(std::string("0,GPU-abc"), 4), 1);
  EXPECT_EQ(ApplyCudaVisibleDevices(std::string("GPU-abc,1"), 4), 1);
}

}  // namespace
}  // namespace ddprun
