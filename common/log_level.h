#pragma once
// How loud a line a pure state machine asks its shell to log is (its kLog actions): the
// agent's rules and the leader election's alike.

namespace ddprun {

enum class LogLevel { kInfo, kWarning, kError };

}  // namespace ddprun
