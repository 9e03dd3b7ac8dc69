#pragma once
// Where the binaries under test are (set by CMake), and a shorthand to run ddprun.
//
// A GPU bundle (scripts/gpu-bundle.sh) moves them: there DDPRUN_TEST_BIN_DIR names the
// folder that holds them all, and DDPRUN_TEST_SOURCE_DIR the source tree (tests/gpu/run.sh
// --bundle sets both).

#include <stdlib.h>

#include <string>
#include <vector>

namespace ddprun::testing {

/// `built` (a path in the build tree), or the file of that name in DDPRUN_TEST_BIN_DIR.
inline std::string BuiltOrBundled(const std::string& built) {
  const char* dir = ::getenv("DDPRUN_TEST_BIN_DIR");
  if (dir == nullptr || *dir == '\0') return built;
  return std::string(dir) + "/" + built.substr(built.rfind('/') + 1);
}

inline std::string SourceDir(const std::string& built) {
  const char* dir = ::getenv("DDPRUN_TEST_SOURCE_DIR");
  return dir == nullptr || *dir == '\0' ? built : dir;
}

inline const std::string kDdprun = BuiltOrBundled(DDPRUN_BIN);
inline const std::string kTestWorker = BuiltOrBundled(TEST_WORKER_BIN);
inline const std::string kSourceDir = SourceDir(DDPRUN_SOURCE_DIR);

/// {ddprun, options..., "--no-python", test_worker, worker_args...}
inline std::vector<std::string> DdprunWithTestWorker(std::vector<std::string> options,
                                                     const std::vector<std::string>& worker_args) {
  std::vector<std::string> argv = {kDdprun};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back("--no-python");
  argv.push_back(kTestWorker);
  argv.insert(argv.end(), worker_args.begin(), worker_args.end());
  return argv;
}

}  // namespace ddprun::testing
