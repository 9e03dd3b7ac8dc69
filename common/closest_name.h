#pragma once
// Names close enough to be a typo of each other, for "did you mean ...?" in messages.

#include <cstddef>
#include <string>
#include <vector>

namespace ddprun {

/// Levenshtein distance: single-character insertions, deletions and substitutions.
size_t EditDistance(const std::string& a, const std::string& b);

/// Of `names`, the one closest to `unknown` by edit distance, when it is at most `allowed`
/// edits away; "" otherwise (the first of equals wins).
std::string ClosestName(const std::string& unknown, const std::vector<std::string>& names,
                        size_t allowed);

}  // namespace ddprun
