#pragma once
// What `ddprun --help` and `ddprun --help-all` print, made from the option declarations
// (DescribeOptions) and wrapped to the terminal. --help is torchrun's everyday options,
// short enough to read in one screen; --help-all is every option by section, with its
// spellings and PET_ variable, and the environment, signals and exit statuses. Pure.

#include <string>
#include <vector>

#include "launcher/option_docs.h"

namespace ddprun {

enum class HelpScope { kEveryday, kAll };

/// The help text for `scope`, no line longer than `width` columns (where a word allows).
std::string FormatHelp(const std::vector<OptionDoc>& options, HelpScope scope, int width);

/// The width to wrap to: $COLUMNS when it is a number, else the terminal's, else 80; at
/// least 40 and at most 100 (longer lines are hard to read).
int HelpWidth(const std::string& columns_variable, int terminal_columns);

/// `text` wrapped at spaces to `width`, every line after the first indented by `indent`
/// (the first by `first_indent`).
std::string Wrap(const std::string& text, size_t first_indent, size_t indent, size_t width);

}  // namespace ddprun
