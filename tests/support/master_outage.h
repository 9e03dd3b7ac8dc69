#pragma once
// What the master-outage tests look for (docs/protocol.md, "Losing the master"): an agent
// that had its place back, and workers (tests/integration/test_worker count-starts) that
// never restarted.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace ddprun::testing {

/// Every rank from `first_rank` to `first_rank + ranks - 1` (count-starts workers in `dir`)
/// wrote `needle` at least `times` times.
inline bool AllLogged(const TempDir& dir, int first_rank, int ranks, const std::string& needle,
                      int times) {
  for (int rank = first_rank; rank < first_rank + ranks; ++rank) {
    if (CountLinesContaining(ReadFile(dir / absl::StrCat("starts.", rank)), needle) < times) {
      return false;
    }
  }
  return true;
}

/// The agent said it lost its master while its workers ran `round`, and they go on.
inline bool SaidWorkersGoOn(ChildProcess& agent, int64_t round) {
  return agent.ErrSoFar().find(absl::StrCat("this node's workers go on (round ", round, ")")) !=
         std::string::npos;
}

/// The agent said a master gave it its place back in `round`, its workers never stopped.
inline bool SaidPlaceBack(ChildProcess& agent, int64_t round) {
  return agent.ErrSoFar().find(absl::StrCat("its place back in round ", round,
                                            "; its workers never stopped")) != std::string::npos;
}

/// Both agents had their places back in `round` within `timeout` (what they said, if not).
inline ::testing::AssertionResult BothHadTheirPlacesBack(ChildProcess& a, ChildProcess& b,
                                                         int64_t round, absl::Duration timeout) {
  if (WaitUntil([&] { return SaidPlaceBack(a, round) && SaidPlaceBack(b, round); }, timeout)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "not both back in round " << round << ":\n"
                                       << a.ErrSoFar() << b.ErrSoFar();
}

/// Each of `ranks` count-starts workers in `dir` started once and was never stopped.
inline void ExpectEveryWorkerStartedOnce(const TempDir& dir, int ranks) {
  for (int rank = 0; rank < ranks; ++rank) {
    const std::string starts = ReadFile(dir / absl::StrCat("starts.", rank));
    EXPECT_EQ(CountLinesContaining(starts, "started"), 1) << "rank " << rank << ": " << starts;
    EXPECT_EQ(CountLinesContaining(starts, "stopped"), 0) << "rank " << rank << ": " << starts;
  }
}

}  // namespace ddprun::testing
