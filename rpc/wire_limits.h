#pragma once
// The checks each bound of docs/protocol.md#checks-on-join is made of; each error names the
// field, its size or value, and the limit (wire_checks.cc, run_settings_wire.cc).

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace ddprun {

absl::Status CheckLength(const std::string& field, const std::string& value, size_t limit);
absl::Status CheckRange(const std::string& field, int64_t value, int64_t lo, int64_t hi);

}  // namespace ddprun
