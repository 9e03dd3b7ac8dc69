#include "agent/logs/duplicate_filter.h"

#include <gtest/gtest.h>

#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

TEST(DuplicateFilters, AreCommaSeparatedWithDoubledCommasKept) {
  EXPECT_EQ(ParseDuplicateFilters("NCCL,CUDA error"),
            (std::vector<std::string>{"NCCL", "CUDA error"}));
  EXPECT_EQ(ParseDuplicateFilters("a,,b,c"), (std::vector<std::string>{"a,b", "c"}));
  EXPECT_TRUE(ParseDuplicateFilters("").empty());
  // torchrun's "a," would also match every line through its empty filter.
  EXPECT_EQ(ParseDuplicateFilters("a,"), (std::vector<std::string>{"a"}));
}

TEST(DuplicateFilters, WriteMatchingLinesWithTheirPrefixInOneFile) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/filtered_stderr.log";
  absl::StatusOr<UniqueFd> file = OpenForAppend(path);
  ASSERT_TRUE(file.ok());
  DuplicateFilter filter({"NCCL", "CUDA error"}, std::move(*file));
  EXPECT_TRUE(filter.Matches("NCCL WARN timeout"));
  EXPECT_FALSE(filter.Matches("nccl in lower case"));
  filter.Offer("[default0]:", "NCCL WARN timeout");
  filter.Offer("[default1]:", "loss 0.1");
  filter.Offer("[default1]:", "RuntimeError: CUDA error: out of memory");
  filter.Flush();
  EXPECT_EQ(testing::ReadFile(path),
            "[default0]:NCCL WARN timeout\n[default1]:RuntimeError: CUDA error: out of memory\n");
}

}  // namespace
}  // namespace ddprun
