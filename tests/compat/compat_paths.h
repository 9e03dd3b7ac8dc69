#pragma once
// Where the compat tests find PyTorch and their own scripts.

#include <stdlib.h>

#include <string>

#include "tests/support/ddprun_paths.h"

namespace ddprun::testing {

/// Debian's python3, which has torch 1.13 (the `python3` first on PATH may have none).
inline const std::string kPython = "/usr/bin/python3";
inline const std::string kCompatDir = kSourceDir + "/tests/compat";
/// python3 of the torch 2.x root in $DDPRUN_TORCH2_ROOT (scripts/torch2-root.sh).
inline const std::string kTorch2Python = kCompatDir + "/torch2_python.sh";

/// Why a torch 2.x test skips here; empty when $DDPRUN_TORCH2_ROOT names the root.
inline std::string WhyNoTorch2() {
  const char* root = ::getenv("DDPRUN_TORCH2_ROOT");
  if (root != nullptr && *root != '\0') return "";
  return "DDPRUN_TORCH2_ROOT is not set: scripts/test.sh makes the torch 2.x root "
         "(scripts/torch2-root.sh) when run as root";
}

}  // namespace ddprun::testing
