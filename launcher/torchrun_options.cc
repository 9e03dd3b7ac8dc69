#include "launcher/torchrun_options.h"

#include <algorithm>

namespace ddprun {

// Read at cyyever/pytorch@00d947a63c3f6a7da87dc14149ce46123f737d81 (a fork that tracks main;
// PyTorch PRs #191265 and #191289 of July 2026 are its newest options); Debian sid's
// python3-torch 2.14.1 declares the same list. When torchrun adds an option, add it here.
const std::vector<std::string>& TorchrunOptionNames() {
  static const auto* names = new std::vector<std::string>{
      "--nnodes",
      "--nproc-per-node",
      "--rdzv-backend",
      "--rdzv-endpoint",
      "--rdzv-id",
      "--rdzv-conf",
      "--standalone",
      "--max-restarts",
      "--monitor-interval",
      "--start-method",
      "--event-log-handler",
      "--role",
      "--module",
      "--no-python",
      "--run-path",
      "--log-dir",
      "--redirects",
      "--tee",
      "--log-line-prefix-template",
      "--local-ranks-filter",
      "--duplicate-stdout-filters",
      "--duplicate-stderr-filters",
      "--node-rank",
      "--master-addr",
      "--master-port",
      "--local-addr",
      "--logs-specs",
      "--numa-binding",
      "--signals-to-handle",
      "--shutdown-timeout",
      "--virtual-local-rank",
      "--print-completion",
  };
  return *names;
}

bool IsTorchrunOption(const std::string& name) {
  const std::vector<std::string>& names = TorchrunOptionNames();
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace ddprun
