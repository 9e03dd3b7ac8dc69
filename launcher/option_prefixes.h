#pragma once
// Abbreviated options, as torchrun's argparse takes them: launch scripts in the wild carry
// `--max_restart=2` or `--nproc_per_nod 8`, and argparse accepts any unique prefix of an
// option string. Pure: the command line and the known options in, the command line with
// every abbreviation written out (or the reason it cannot be) out.
//
// argparse's rules, kept: an exact spelling wins over a prefix; `-` and `_` are different
// characters (`--max-r` is not `--max_restarts`); `--pre=value` abbreviates the part before
// `=`; nothing after the training script (or after `--`) is an option. Where ddprun is
// kinder on purpose: a prefix that matches several spellings of ONE option (`--max_r`
// matches only `--max_restarts`, but `--nproc` matches `--nproc-per-node` and
// `--nproc_per_node`) is that option, where argparse calls it ambiguous; and a prefix that
// matches one of torchrun's options and ddprun's own ones too (`--max-` : `--max-restarts`,
// `--max-node-failures`, ...) is torchrun's, so a torchrun script means what it meant.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddprun {

struct KnownOption {
  std::vector<std::string> spellings;  // "--nproc-per-node", "--nproc_per_node", "-r", ...
  bool takes_value = false;            // the next argument is its value (unless `=` gives one)
  bool torchrun = false;               // one of torchrun's own options
  // Not an option: one of torch.distributed.launch's, which scripts still pass. Given (or
  // named by a prefix), the command line is refused with this, which says what to do.
  std::string launch_era_hint;
};

/// `args` with every unique prefix of a long option replaced by the option's first
/// spelling (`--max_restart=2` -> `--max-restarts=2`). An ambiguous prefix is an
/// InvalidArgument that lists the candidates; so is a launch-era option (or a prefix that
/// names one, not a longer option: `--local-rank=1` is not `--local-ranks-filter=1`), with its
/// hint; an unknown option is left as it is.
absl::StatusOr<std::vector<std::string>> ExpandOptionPrefixes(
    const std::vector<std::string>& args, const std::vector<KnownOption>& options);

/// The known spelling closest to `unknown` (`--nproc-per-nodes` -> `--nproc-per-node`), by
/// edit distance, when it is close enough to be a typo of it; "" otherwise.
std::string ClosestOption(const std::string& unknown, const std::vector<KnownOption>& options);

}  // namespace ddprun
