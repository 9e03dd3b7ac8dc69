#pragma once
// The order of host names in a round when nothing else decides it. Pure.

#include <string>

namespace ddprun {

/// "node2" < "node10": digits compare as numbers, the rest as bytes.
bool NaturalLess(const std::string& a, const std::string& b);

}  // namespace ddprun
