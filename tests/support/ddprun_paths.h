#pragma once
// Where the binaries under test are (set by CMake), and a shorthand to run ddprun.

#include <string>
#include <vector>

namespace ddprun::testing {

inline const std::string kDdprun = DDPRUN_BIN;
inline const std::string kTestWorker = TEST_WORKER_BIN;
inline const std::string kSourceDir = DDPRUN_SOURCE_DIR;

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
