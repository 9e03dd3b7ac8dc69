#include "launcher/options_health.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace ddprun {
namespace {

constexpr char kHealthGroup[] = "Node health";
// The limits an elastic job gets unless told otherwise; static jobs (MIN = MAX) get none,
// as a node kept out there can only end the job.
constexpr int kElasticNodeFailures = 3;
constexpr int kElasticNodeFlaps = 3;
constexpr double kBytesPerGiB = 1024.0 * 1024 * 1024;

absl::Status HealthCheck(const std::string& value, ParseState& s) {
  absl::string_view rest = value;
  if (rest == "none") return absl::OkStatus();  // not even the built-in check
  if (absl::ConsumePrefix(&rest, "builtin")) {
    if (!rest.empty() && !absl::ConsumePrefix(&rest, ",")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--health-check='", value,
          "' is not valid: expected builtin, none, a command, or builtin,COMMAND for both"));
    }
    s.config.health_check.builtin = true;
  }
  s.config.health_check.command = std::string(absl::StripAsciiWhitespace(rest));
  return absl::OkStatus();
}

absl::Status HealthCheckTimeout(const std::string& value, ParseState& s) {
  DDPRUN_ASSIGN_OR_RETURN(s.config.health_check.timeout,
                          ParseSeconds("--health-check-timeout", value, /*positive=*/true));
  return absl::OkStatus();
}

absl::Status MinFreeDisk(const std::string& value, ParseState& s) {
  double gib = 0;
  if (!absl::SimpleAtod(value, &gib) || gib < 0 || gib > 1e9) {
    return absl::InvalidArgumentError(absl::StrCat("--health-check-min-free-disk='", value,
                                                   "' is not valid: expected GiB, a number >= 0"));
  }
  s.config.health_check.min_free_disk_bytes = static_cast<int64_t>(gib * kBytesPerGiB);
  return absl::OkStatus();
}

absl::Status MaxNodeFailures(const std::string& value, ParseState& s) {
  if (value.empty()) return absl::OkStatus();  // ApplyNodeHealthRules
  DDPRUN_ASSIGN_OR_RETURN(s.config.rendezvous.node_health.max_node_failures,
                          ParseNonNegativeInt("--max-node-failures", value));
  return absl::OkStatus();
}

absl::Status MaxNodeFlaps(const std::string& value, ParseState& s) {
  if (value.empty()) return absl::OkStatus();  // ApplyNodeHealthRules
  DDPRUN_ASSIGN_OR_RETURN(s.config.rendezvous.node_health.max_node_flaps,
                          ParseNonNegativeInt("--max-node-flaps", value));
  return absl::OkStatus();
}

absl::Status NodeCooldown(const std::string& value, ParseState& s) {
  DDPRUN_ASSIGN_OR_RETURN(absl::Duration cooldown, ParseSeconds("--node-cooldown", value));
  s.config.rendezvous.node_health.node_cooldown =
      cooldown == absl::ZeroDuration() ? absl::InfiniteDuration() : cooldown;
  return absl::OkStatus();
}

absl::Status ExcludeHosts(const std::string& value, ParseState& s) {
  for (absl::string_view host : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    host = absl::StripAsciiWhitespace(host);
    if (host.size() > 255 || absl::StrContains(host, ' ')) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--exclude-hosts: '", host, "' is not a host name; expected names separated by commas"));
    }
    s.config.rendezvous.node_health.exclude_hosts.emplace_back(host);
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<OptionSpec> WithNodeHealthOptions(std::vector<OptionSpec> table) {
  const AgentConfig defaults;
  std::vector<OptionSpec> health = {
      Option("--health-check", HealthCheck)
          .In(kHealthGroup)
          .Help(
              "Run before this node joins each round (/bin/sh -c CMD, in the node's environment): "
              "exit 0 is healthy; else the node stays out for --node-cooldown and the master is "
              "told why. 'builtin': the built-in check (GPUs, NVML, free disk; on by default with "
              "--nproc-per-node=gpu), 'builtin,CMD': both, 'none': no check (ddprun only)"),
      Option("--health-check-timeout", HealthCheckTimeout)
          .In(kHealthGroup)
          .Default(SecondsText(defaults.health_check.timeout))
          .Help("Seconds a health check may run; one still running is killed and failed"),
      Option("--health-check-min-free-disk", MinFreeDisk)
          .In(kHealthGroup)
          .Default(absl::StrCat(defaults.health_check.min_free_disk_bytes / kBytesPerGiB))
          .Help("GiB the built-in check wants free in the log dir's file system; 0: not checked"),
      Option("--max-node-failures", MaxNodeFailures)
          .In(kHealthGroup)
          .Help("Failures a node may cause (as their root cause) before the master excludes it for "
                "--node-cooldown; 0: never. Unset: 3 for elastic jobs (--nnodes=MIN:MAX), 0 for "
                "static"),
      Option("--max-node-flaps", MaxNodeFlaps)
          .In(kHealthGroup)
          .Help(
              "Times a node's connection may be lost while it runs a round before the master "
              "excludes it for --node-cooldown; 0: never. Unset: 3 for elastic jobs, 0 for static"),
      Option("--node-cooldown", NodeCooldown)
          .In(kHealthGroup)
          .Default(SecondsText(defaults.rendezvous.node_health.node_cooldown))
          .Help("Seconds an excluded or unhealthy node stays out before it may join again; 0: for "
                "the rest of the job (its agent exits 69)"),
      Option("--exclude-hosts", ExcludeHosts)
          .In(kHealthGroup)
          .Help("Hosts the job must not use, separated by commas: their agents are refused and "
                "exit 69"),
  };
  table.insert(table.end(), health.begin(), health.end());
  return table;
}

void ApplyNodeHealthRules(const OptionValues& values, const LaunchEnvironment& env,
                          AgentConfig& config) {
  const bool elastic = config.rendezvous.min_nodes < config.rendezvous.max_nodes;
  if (values["--max-node-failures"].empty()) {
    config.rendezvous.node_health.max_node_failures = elastic ? kElasticNodeFailures : 0;
  }
  if (values["--max-node-flaps"].empty()) {
    config.rendezvous.node_health.max_node_flaps = elastic ? kElasticNodeFlaps : 0;
  }
  HealthCheckSettings& check = config.health_check;
  if (values["--nproc-per-node"] == "gpu") {
    if (values["--health-check"].empty()) check.builtin = true;
    check.expected_gpus = config.nproc_per_node;
  }
  if (!config.log_dir.empty()) {
    check.disk_path = config.log_dir;
  } else {
    auto tmp = env.vars.find("TMPDIR");
    check.disk_path = tmp != env.vars.end() && !tmp->second.empty() ? tmp->second : "/tmp";
  }
  // A free-disk threshold is the built-in check's: asking for one turns it on.
  if (check.min_free_disk_bytes > 0 && values["--health-check"] != "none") check.builtin = true;
}

}  // namespace ddprun
