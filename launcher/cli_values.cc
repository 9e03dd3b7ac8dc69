#include "launcher/cli_values.h"

#include <signal.h>

#include <string.h>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/process_status.h"

namespace ddprun {

absl::Status InvalidValue(const std::string& option, const std::string& value,
                          const std::string& expected) {
  return absl::InvalidArgumentError(
      absl::StrCat(option, "='", value, "' is not valid: expected ", expected));
}

bool ParseStrictInt(absl::string_view text, int& out) {
  // absl::SimpleAtoi accepts surrounding blanks and a '+'; a command line should not.
  if (text.empty() || absl::ascii_isspace(text.front()) || absl::ascii_isspace(text.back()) ||
      text.front() == '+') {
    return false;
  }
  return absl::SimpleAtoi(text, &out);
}

absl::StatusOr<NodeRange> ParseNnodes(const std::string& value) {
  const std::string expected = "a node count N or a range MIN:MAX with 1 <= MIN <= MAX";
  std::vector<std::string> parts = absl::StrSplit(value, ':');
  NodeRange range;
  if (parts.size() == 1 && ParseStrictInt(parts[0], range.min_nodes)) {
    range.max_nodes = range.min_nodes;
  } else if (parts.size() != 2 || !ParseStrictInt(parts[0], range.min_nodes) ||
             !ParseStrictInt(parts[1], range.max_nodes)) {
    return InvalidValue("--nnodes", value, expected);
  }
  if (range.min_nodes < 1 || range.max_nodes < range.min_nodes) {
    return InvalidValue("--nnodes", value, expected);
  }
  return range;
}

absl::StatusOr<Endpoint> ParseEndpoint(const std::string& value, int default_port) {
  const std::string expected = "HOST, HOST:PORT, [IPV6] or [IPV6]:PORT with PORT 0-65535";
  Endpoint endpoint{value, default_port};
  std::string port_text;
  if (!value.empty() && value.front() == '[') {
    const size_t close = value.find(']');
    if (close == std::string::npos || close == 1)
      return InvalidValue("--rdzv-endpoint", value, expected);
    endpoint.host = value.substr(1, close - 1);
    const std::string rest = value.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return InvalidValue("--rdzv-endpoint", value, expected);
      port_text = rest.substr(1);
      if (port_text.empty()) return InvalidValue("--rdzv-endpoint", value, expected);
    }
  } else {
    const size_t colon = value.find(':');
    if (colon != std::string::npos) {
      if (value.find(':', colon + 1) != std::string::npos) {
        return InvalidValue("--rdzv-endpoint", value,
                            expected + " (write IPv6 addresses in brackets)");
      }
      endpoint.host = value.substr(0, colon);
      port_text = value.substr(colon + 1);
      if (port_text.empty()) return InvalidValue("--rdzv-endpoint", value, expected);
    }
  }
  if (endpoint.host.empty()) return InvalidValue("--rdzv-endpoint", value, expected);
  if (!port_text.empty() &&
      (!ParseStrictInt(port_text, endpoint.port) || endpoint.port < 0 || endpoint.port > 65535)) {
    return InvalidValue("--rdzv-endpoint", value, expected);
  }
  return endpoint;
}

absl::StatusOr<int> ParseNprocPerNode(const std::string& value, const DeviceCounts& devices) {
  if (value == "cpu") return std::max(devices.cpu_count, 1);
  if (value == "xpu") {
    absl::StatusOr<int> xpus =
        devices.count_xpus ? devices.count_xpus() : absl::UnavailableError("no Intel probe");
    if (!xpus.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("--nproc-per-node=xpu: cannot count Intel GPUs: ", xpus.status().message()));
    }
    if (*xpus > 0) return *xpus;
    return absl::FailedPreconditionError(
        "--nproc-per-node=xpu: no Intel GPU is visible on this node (no i915 or xe card in "
        "/sys/class/drm, or ZE_AFFINITY_MASK hides them all); give a number, or 'gpu' or "
        "'auto'");
  }
  if (value == "gpu" || value == "auto") {
    absl::StatusOr<int> gpus = devices.count_gpus();
    if (!gpus.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--nproc-per-node=", value, ": cannot count GPUs: ", gpus.status().message()));
    }
    if (*gpus > 0) return *gpus;
    if (value == "auto") return std::max(devices.cpu_count, 1);
    return absl::FailedPreconditionError(
        "--nproc-per-node=gpu: no GPU is visible on this node (no NVIDIA driver and no AMD or "
        "Intel GPU in /sys, or CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES or ZE_AFFINITY_MASK "
        "hides them all); give a number, or 'cpu' or 'auto'");
  }
  int n = 0;
  if (!ParseStrictInt(value, n) || n < 1) {
    return InvalidValue("--nproc-per-node", value,
                        "a positive integer, 'cpu', 'gpu', 'xpu' or 'auto'");
  }
  // A bound well above any machine's cores: 100,000 workers on one node is a typo.
  if (n > kMaxNprocPerNode) {
    return InvalidValue("--nproc-per-node", value,
                        absl::StrCat("at most ", kMaxNprocPerNode, " workers on one node"));
  }
  return n;
}

absl::StatusOr<StdSpec> ParseStdSpec(const std::string& option, const std::string& value) {
  const std::string expected =
      "0 (none), 1 (stdout), 2 (stderr) or 3 (both), for all local ranks or as a "
      "LOCAL_RANK:VALUE list such as 0:1,12:3";
  StdSpec spec;
  int streams = 0;
  if (ParseStrictInt(value, streams)) {
    if (streams < kStdNone || streams > kStdBoth) return InvalidValue(option, value, expected);
    spec.all_ranks = streams;
    return spec;
  }
  for (absl::string_view item : absl::StrSplit(value, ',')) {
    std::vector<absl::string_view> kv = absl::StrSplit(item, ':');
    int rank = 0;
    if (kv.size() != 2 || !ParseStrictInt(kv[0], rank) || rank < 0 ||
        !ParseStrictInt(kv[1], streams) || streams < kStdNone || streams > kStdBoth) {
      return InvalidValue(option, value, expected);
    }
    if (!spec.per_rank.emplace(rank, streams).second) {
      return InvalidValue(
          option, value,
          absl::StrCat(expected, ", each local rank once (", rank, " is given twice)"));
    }
  }
  return spec;
}

absl::StatusOr<std::map<std::string, std::string>> ParseRdzvConf(const std::string& value) {
  std::map<std::string, std::string> conf;
  if (value.empty()) return conf;
  for (absl::string_view item : absl::StrSplit(value, ',')) {
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos || eq == 0 || eq + 1 == item.size()) {
      return InvalidValue("--rdzv-conf", value,
                          absl::StrCat("key=value pairs separated by commas, such as "
                                       "join_timeout=600,last_call_timeout=30 ('",
                                       item, "' is not key=value)"));
    }
    const std::string key(item.substr(0, eq));
    if (!conf.emplace(key, std::string(item.substr(eq + 1))).second) {
      return InvalidValue("--rdzv-conf", value,
                          absl::StrCat("each key once ('", key, "' is repeated)"));
    }
  }
  return conf;
}

absl::StatusOr<std::vector<int>> ParseSignalList(const std::string& value) {
  std::vector<int> signals;
  for (absl::string_view raw : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
    std::string name = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(raw));
    if (absl::StartsWith(name, "SIG")) name = name.substr(3);
    int number = 0;
    for (int sig = 1; sig < NSIG; ++sig) {
      const char* abbrev = SignalAbbreviation(sig);
      if (abbrev != nullptr && name == abbrev) number = sig;
    }
    // Names Python's signal module also knows, which SignalAbbreviation spells another way.
    if (name == "IOT") number = SIGABRT;
    if (name == "POLL" || name == "IO") number = SIGIO;
    if (name == "CLD") number = SIGCHLD;
    if (number == 0 || number == SIGKILL || number == SIGSTOP || number == SIGCHLD ||
        number == SIGSEGV || number == SIGBUS || number == SIGFPE || number == SIGILL) {
      return InvalidValue("--signals-to-handle", value,
                          absl::StrCat("signal names such as SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1,"
                                       "SIGUSR2 ('",
                                       raw, "' is not a signal the agent can handle)"));
    }
    if (std::find(signals.begin(), signals.end(), number) == signals.end()) {
      signals.push_back(number);
    }
  }
  if (signals.empty()) {
    return InvalidValue("--signals-to-handle", value, "at least one signal name, such as SIGTERM");
  }
  return signals;
}

absl::StatusOr<std::set<int>> ParseLocalRanksFilter(const std::string& value, int nproc) {
  std::set<int> ranks;
  for (absl::string_view item : absl::StrSplit(value, ',')) {
    int rank = 0;
    if (!ParseStrictInt(absl::StripAsciiWhitespace(item), rank) || rank < 0 || rank >= nproc) {
      return InvalidValue("--local-ranks-filter", value,
                          absl::StrCat("comma-separated local ranks from 0 to ", nproc - 1,
                                       " (--nproc-per-node=", nproc, ")"));
    }
    ranks.insert(rank);
  }
  return ranks;
}

absl::StatusOr<int> ParseNonNegativeInt(const std::string& option, const std::string& value) {
  int n = 0;
  if (!ParseStrictInt(value, n) || n < 0) return InvalidValue(option, value, "a whole number >= 0");
  return n;
}

std::string SecondsText(absl::Duration d) {
  const int64_t ms = absl::ToInt64Milliseconds(d);
  return ms % 1000 == 0 ? absl::StrCat(ms / 1000) : absl::StrCat(ms / 1000.0);
}

absl::StatusOr<absl::Duration> ParseSeconds(const std::string& option, const std::string& value,
                                            bool positive) {
  double seconds = 0;
  if (value.empty() || absl::ascii_isspace(value.front()) || absl::ascii_isspace(value.back()) ||
      !absl::SimpleAtod(value, &seconds) || !(seconds >= 0) || (positive && seconds == 0) ||
      seconds > 1e9) {
    return InvalidValue(option, value,
                        positive ? "a number of seconds > 0" : "a number of seconds >= 0");
  }
  return absl::Seconds(seconds);
}

}  // namespace ddprun
