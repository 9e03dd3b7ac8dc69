#pragma once
// Every option as --help, --help-all, the man page and the shell completions show it, made
// from the option table (options.h) and the few options CLI11 handles itself (--help,
// --version, ...), so that none of them can disagree with the parser.

#include <string>
#include <vector>

#include "launcher/options.h"

namespace ddprun {

/// One option as --help shows it: what the man page and the shell completion are made of
/// (launcher/docgen.cc), so that the three never disagree.
struct OptionDoc {
  std::vector<std::string> names;  // every spelling: "-r", "--redirects", ...
  std::string env;                 // its PET_* variable; empty for --help and --version
  std::string help;                // the --help text, with its default
  std::string group;               // the --help section
  bool takes_value = false;
  std::vector<std::string> completion;  // words, "<dirs>" or "<files>" (options.h)
};

/// Every option, in --help's order.
std::vector<OptionDoc> DescribeOptions();
/// What --help prints after the options: the positional arguments, environment, exit status.
std::string HelpFooter();

/// The shells --print-completion knows, in its --help order.
const std::vector<std::string>& CompletionShells();

/// "--nproc-per-node" -> "--nproc-per-node,--nproc_per_node", with the short name first: the
/// spellings CLI11 declares.
std::string Spellings(const OptionSpec& spec);
/// An option's help with its default, "[default: ...]".
std::string HelpText(const OptionSpec& spec);

/// The help of --help-all and --print-completion, which CLI11 declares itself.
extern const char kHelpAllHelp[];
extern const char kPrintCompletionHelp[];

}  // namespace ddprun
