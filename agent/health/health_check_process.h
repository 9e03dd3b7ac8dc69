#pragma once
// ddprun's health-check mode: what HealthCheckRun (health_check.h) starts in a child process.
// `ddprun --ddprun-health-check [--gpus N] [--min-free-disk BYTES --disk-path P] [-- CMD]`
// runs the built-in check in this process (it may load the GPU driver: it is thrown away
// afterwards), then execs /bin/sh -c CMD. Exit 0: healthy. The built-in check's findings go
// to stderr; what it skipped to stdout, as "ddprun-health-skipped: ...".

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ddprun {

inline constexpr char kHealthCheckMode[] = "--ddprun-health-check";
inline constexpr char kHealthSkippedPrefix[] = "ddprun-health-skipped: ";

/// What the built-in check found, as it reads them, for the pure rule below.
struct NodeFacts {
  int expected_gpus = 0;  // 0: GPUs are not checked
  int visible_gpus = 0;
  std::vector<std::string> unusable_gpus;  // "GPU 3: uncorrected ECC errors (2)", from NVML
  int64_t min_free_disk_bytes = 0;         // 0: disk is not checked
  int64_t free_disk_bytes = 0;
  std::string disk_path;
};

/// The built-in rule: why the node is unhealthy, a line each; empty: healthy.
std::vector<std::string> BuiltinProblems(const NodeFacts& facts);

/// The health-check mode's main (argv[1] is kHealthCheckMode). Returns the exit status, or
/// execs the user's command.
int RunHealthCheckProcess(const std::vector<std::string>& args);

}  // namespace ddprun
