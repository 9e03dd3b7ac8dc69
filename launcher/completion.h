#pragma once
// ddprun's shell completions, made from the same option declarations as --help
// (DescribeOptions): the bash and zsh files the package installs (ddprun-docgen) and what
// `ddprun --print-completion SHELL` prints.

#include <optional>
#include <string>
#include <vector>

namespace ddprun {

/// The completion script for `shell` (one of CompletionShells(), option_docs.h); nullopt for
/// another.
std::optional<std::string> CompletionScript(const std::string& shell);

}  // namespace ddprun
