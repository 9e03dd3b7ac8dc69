// The command line: ParseCommandLine over arbitrary arguments (the input split at NUL
// bytes). It may refuse anything, but never crash, hang or trip a sanitizer.

#include <cstdint>
#include <string>
#include <vector>

#include "launcher/cli.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  // token_file= and tls_*= read files: a fuzzed path could name a FIFO and block. Not a
  // parser bug.
  if (input.find("token_file") != std::string::npos || input.find("tls_") != std::string::npos) {
    return 0;
  }
  std::vector<std::string> args;
  size_t start = 0;
  for (size_t i = 0; i <= input.size(); ++i) {
    if (i == input.size() || input[i] == '\0') {
      args.push_back(input.substr(start, i - start));
      start = i + 1;
    }
  }
  ddprun::DeviceCounts devices;
  devices.count_gpus = []() -> absl::StatusOr<int> { return 2; };
  devices.cpu_count = 4;
  (void)ddprun::ParseCommandLine(args, devices);
  return 0;
}
