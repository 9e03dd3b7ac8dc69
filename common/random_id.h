#pragma once
// Random names for what must be told apart from every other of its kind: an agent process,
// a run. Not secrets: they are shown in status and logs.

#include <string>

namespace ddprun {

/// 128 random bits from the system's random device, as 32 lowercase hex digits.
std::string RandomId();

}  // namespace ddprun
