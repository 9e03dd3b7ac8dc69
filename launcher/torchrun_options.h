#pragma once
// torchrun's own options, as PyTorch main declares them in torch/distributed/run.py: every
// one is an option of ddprun with the same name. Abbreviations resolve to these first
// (option_prefixes.h), --help lists the everyday ones first, and the tests check the list
// against a real torchrun's parser (tests/compat/torchrun_main_compat_test.cc).

#include <string>
#include <vector>

namespace ddprun {

/// The long names, dashed ("--nproc-per-node"), in run.py's order; -h/--help is argparse's.
const std::vector<std::string>& TorchrunOptionNames();

bool IsTorchrunOption(const std::string& name);

}  // namespace ddprun
