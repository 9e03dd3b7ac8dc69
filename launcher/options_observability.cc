#include "launcher/options.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "launcher/cli_values.h"
#include "observability/elastic_record_log.h"

namespace ddprun {
namespace {

constexpr char kObservabilityGroup[] = "Observability";

absl::Status EventLogHandler(const std::string& value, ParseState& s) {
  DDPRUN_ASSIGN_OR_RETURN(s.config.event_log, ParseEventLogHandler(value));
  return absl::OkStatus();
}

absl::Status MetricsPort(const std::string& value, ParseState& s) {
  if (value.empty()) return absl::OkStatus();
  absl::StatusOr<int> port = ParseNonNegativeInt("--metrics-port", value);
  if (!port.ok() || *port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-port='", value,
                     "' is not valid: expected a TCP port 1-65535, or 0 for any "
                     "free port (said in the log)"));
  }
  s.config.metrics_port = *port;
  return absl::OkStatus();
}

}  // namespace

std::vector<OptionSpec> WithObservabilityOptions(std::vector<OptionSpec> table) {
  table.push_back(
      Option("--event-log-handler", EventLogHandler)
          .In(kObservabilityGroup)
          .Default("null")
          .Help("Where torchelastic's events go, one JSON line each as torch writes them: null "
                "(nowhere), console (stderr) or file:PATH (appended; ddprun only)"));
  table.push_back(
      Option("--metrics-port", MetricsPort)
          .In(kObservabilityGroup)
          .Help("Serve Prometheus metrics on this port over HTTP (/metrics), on every "
                "address; the node that hosts the rendezvous master also serves the job's "
                "status (/api/v1/status) and a live status page (/). 0: any free port "
                "(ddprun only)"));
  return table;
}

}  // namespace ddprun
