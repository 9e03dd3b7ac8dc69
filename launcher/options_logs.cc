#include "absl/strings/str_cat.h"
#include "agent/logs/duplicate_filter.h"
#include "launcher/options.h"

namespace ddprun {
namespace {

absl::Status LogLinePrefixTemplate(const std::string& value, ParseState& s) {
  s.config.log_line_prefix_template = value;
  return absl::OkStatus();
}

// As torchrun, only tee'd lines are filtered: say so when none are.
absl::Status DuplicateFilters(const std::string& option, int stream, const std::string& value,
                              ParseState& s, std::vector<std::string>& filters) {
  filters = ParseDuplicateFilters(value);
  if (filters.empty()) return absl::OkStatus();
  for (int lr = 0; lr < s.config.nproc_per_node; ++lr) {
    if ((s.config.tee.ForRank(lr) & stream) != 0) return absl::OkStatus();
  }
  s.notices.push_back(absl::StrCat(option,
                                   " has no effect: it copies tee'd lines, and no local "
                                   "rank's ",
                                   stream == kStdOut ? "stdout" : "stderr",
                                   " is tee'd; add --tee=", stream));
  return absl::OkStatus();
}

absl::Status DuplicateStdoutFilters(const std::string& value, ParseState& s) {
  return DuplicateFilters("--duplicate-stdout-filters", kStdOut, value, s,
                          s.config.duplicate_stdout_filters);
}

absl::Status DuplicateStderrFilters(const std::string& value, ParseState& s) {
  return DuplicateFilters("--duplicate-stderr-filters", kStdErr, value, s,
                          s.config.duplicate_stderr_filters);
}

// torchrun loads a LogsSpecs class from the Python entry point group torchrun.logs_specs;
// ddprun runs no Python of its own. Refused rather than ignored: the user's class decides
// where the logs go, and ignoring it would put them somewhere the user does not look.
absl::Status LogsSpecs(const std::string& value, ParseState&) {
  if (value.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--logs-specs=", value,
      " names a Python LogsSpecs plug-in, which ddprun cannot load: its layout is fixed "
      "(--log-dir/<run_id>/attempt_<n>/<local_rank>/, docs/logs-and-failures.md); drop the "
      "option, or keep torchrun for this job"));
}

}  // namespace

std::vector<OptionSpec> WithLogOptions(std::vector<OptionSpec> table) {
  table.push_back(
      Option("--log-line-prefix-template", LogLinePrefixTemplate)
          .In(kLogGroup)
          .TorchEnv("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE")
          .Help("The prefix of tee'd lines, with ${role_name}, ${rank}, ${local_rank} and "
                "${hostname} (or $rank ...) filled in, e.g. '[${hostname}:${rank}]: '; unset: "
                "[<role><local_rank>]:"));
  table.push_back(
      Option("--duplicate-stdout-filters", DuplicateStdoutFilters)
          .In(kLogGroup)
          .Help("Comma-separated strings (',,' for a comma): tee'd stdout lines that contain "
                "any of them are also written to attempt_<n>/filtered_stdout.log"));
  table.push_back(Option("--duplicate-stderr-filters", DuplicateStderrFilters)
                      .In(kLogGroup)
                      .Help("The same for tee'd stderr lines, into attempt_<n>/filtered_stderr.log "
                            "(e.g. NCCL,CUDA error)"));
  table.push_back(
      Option("--logs-specs", LogsSpecs)
          .In(kLogGroup)
          .Help("torchrun's Python LogsSpecs plug-in: refused, as ddprun cannot load one; "
                "its log layout is fixed"));
  return table;
}

}  // namespace ddprun
