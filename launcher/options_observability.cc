#include "launcher/options.h"

#include "agent/event_log.h"
#include "common/status_macros.h"

namespace ddprun {
namespace {

constexpr char kObservabilityGroup[] = "Observability";

absl::Status EventLogHandler(const std::string& value, ParseState& s) {
  DDPRUN_ASSIGN_OR_RETURN(s.config.event_log, ParseEventLogHandler(value));
  return absl::OkStatus();
}

}  // namespace

std::vector<OptionSpec> WithObservabilityOptions(std::vector<OptionSpec> table) {
  table.push_back({"--event-log-handler",
                   "",
                   true,
                   false,
                   "null",
                   kObservabilityGroup,
                   "Where torchelastic's events go, one JSON line each as torch writes them: null "
                   "(nowhere), console (stderr) or file:PATH (appended; ddprun only)",
                   "",
                   {},
                   EventLogHandler});
  return table;
}

}  // namespace ddprun
