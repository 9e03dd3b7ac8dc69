#pragma once
// tests/compat/hang_job.py, the hung Python job of the hang tests, and where in it the hung
// rank waits: the report names that line, and the tests must not break when the job changes.

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {

inline const std::string kHangJob = kSourceDir + "/tests/compat/hang_job.py";

/// The line of hang_job.py where the hung rank waits, in hang_in_named_function (0: none).
inline int HungRankLine() {
  std::ifstream job(kHangJob);
  std::string line;
  for (int number = 1; std::getline(job, line); ++number) {
    if (line.find("threading.Event().wait()") != std::string::npos) return number;
  }
  return 0;
}

/// "hang_in_named_function (<job>:<line>)": where the hung rank waits, as the report says it.
inline std::string HungRankWhere() {
  return absl::StrCat("hang_in_named_function (", kHangJob, ":", HungRankLine(), ")");
}

}  // namespace ddprun::testing
