#pragma once
// What tests/compat/ddp_train.py leaves in its output folder, checked: for the DDP tests
// here, in tests/netns, and with torch 2.x.

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/support/child_process.h"

namespace ddprun::testing {

/// Every rank of a `world`-worker job trained (its loss fell twentyfold) to the same
/// parameters; their digest ("" when a rank wrote no result).
inline std::string ExpectTrained(const TempDir& out, int world) {
  std::string digest;
  for (int rank = 0; rank < world; ++rank) {
    std::vector<std::string> fields = absl::StrSplit(
        absl::StripAsciiWhitespace(ReadFile(out / absl::StrCat("rank", rank, ".txt"))), ' ');
    if (fields.size() != 3u) {
      ADD_FAILURE() << "rank " << rank << " wrote no result";
      return "";
    }
    if (rank == 0) digest = fields[0];
    EXPECT_EQ(fields[0], digest) << "rank " << rank << " ended with other parameters";
    double before = 0, after = 0;
    EXPECT_TRUE(absl::SimpleAtod(fields[1], &before) && absl::SimpleAtod(fields[2], &after));
    EXPECT_LT(after, before * 0.05) << "rank " << rank << " did not train";
  }
  return digest;
}

/// What the launcher told rank `rank` (launch<rank>.txt: MASTER_ADDR and the rest).
inline std::map<std::string, std::string> Launch(const TempDir& out, int rank) {
  return ParseEnvFile(out / absl::StrCat("launch", rank, ".txt"));
}

/// Every one of `world` ranks was told to meet at `addr:port` in the agent's store.
inline void ExpectMeetingAt(const TempDir& out, int world, const std::string& addr, int port) {
  for (int rank = 0; rank < world; ++rank) {
    std::map<std::string, std::string> launch = Launch(out, rank);
    EXPECT_EQ(launch["MASTER_ADDR"], addr) << "rank " << rank;
    EXPECT_EQ(launch["MASTER_PORT"], std::to_string(port)) << "rank " << rank;
    EXPECT_EQ(launch["TORCHELASTIC_USE_AGENT_STORE"], "True") << "rank " << rank;
  }
}

}  // namespace ddprun::testing
