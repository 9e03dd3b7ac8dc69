#include "rendezvous/node_health.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/ip_address.h"
#include "common/natural_less.h"

namespace ddprun {

namespace {

constexpr char kListedReason[] =
    "it is listed in --exclude-hosts (take it off the list on every node to use it)";

// "node3" names "node3.cluster.local" and the other way round: operators write either.
bool SameHost(const std::string& listed, const std::string& host) {
  if (absl::EqualsIgnoreCase(listed, host)) return true;
  const std::string listed_short = listed.substr(0, listed.find('.'));
  const std::string host_short = host.substr(0, host.find('.'));
  const bool one_is_short =
      listed_short.size() == listed.size() || host_short.size() == host.size();
  return one_is_short && absl::EqualsIgnoreCase(listed_short, host_short);
}

std::string Plural(int n, const char* one, const char* many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

}  // namespace

std::string NodeHealth::Key(const std::string& host) {
  std::string key = absl::AsciiStrToLower(host);
  while (!key.empty() && key.back() == '.') key.pop_back();
  if (std::string ip = CanonicalIp(key); !ip.empty()) return ip;
  return key.substr(0, key.find('.'));
}

NodeHealth::Ledger& NodeHealth::Of(const std::string& host) {
  ++changes_;  // every caller changes what it finds
  Ledger& ledger = hosts_[Key(host)];
  if (ledger.record.host.empty()) ledger.record.host = host;
  return ledger;
}

void NodeHealth::Exclude(Ledger& ledger, std::string reason, absl::Time now) {
  ledger.record.reason = std::move(reason);
  ledger.record.until = settings_.node_cooldown == absl::InfiniteDuration()
                            ? absl::InfiniteFuture()
                            : now + settings_.node_cooldown;
  ++ledger.record.times_excluded;
  // Admitted again after the cooldown, a node starts from zero: its limits count afresh.
  ledger.failures_since_admitted = 0;
  ledger.flaps_since_admitted = 0;
}

bool NodeHealth::CountFailure(const std::string& host, absl::Time now) {
  Ledger& ledger = Of(host);
  ++ledger.record.failures;
  ++ledger.failures_since_admitted;
  if (settings_.max_node_failures <= 0 ||
      ledger.failures_since_admitted < settings_.max_node_failures) {
    return false;
  }
  Exclude(ledger,
          absl::StrCat("it was the root cause of ",
                       Plural(ledger.failures_since_admitted, "failure", "failures"),
                       " (--max-node-failures=", settings_.max_node_failures, ")"),
          now);
  return true;
}

bool NodeHealth::CountFlap(const std::string& host, absl::Time now) {
  Ledger& ledger = Of(host);
  ++ledger.record.flaps;
  ++ledger.flaps_since_admitted;
  if (settings_.max_node_flaps <= 0 || ledger.flaps_since_admitted < settings_.max_node_flaps) {
    return false;
  }
  Exclude(
      ledger,
      absl::StrCat("its connection was lost ", Plural(ledger.flaps_since_admitted, "time", "times"),
                   " while it ran in a round (--max-node-flaps=", settings_.max_node_flaps, ")"),
      now);
  return true;
}

void NodeHealth::CheckFailed(const std::string& host, const std::string& why, absl::Time now) {
  Ledger& ledger = Of(host);
  ++ledger.record.failed_checks;
  Exclude(ledger, absl::StrCat("its health check failed: ", why), now);
}

void NodeHealth::Left(const std::string& host, const std::string& why, absl::Time now) {
  Exclude(Of(host), absl::StrCat("its agent left the job as unhealthy: ", why), now);
}

bool NodeHealth::Listed(const std::string& host) const {
  return std::any_of(settings_.exclude_hosts.begin(), settings_.exclude_hosts.end(),
                     [&](const std::string& listed) { return SameHost(listed, host); });
}

std::optional<NodeExclusion> NodeHealth::Excluded(const std::string& host, absl::Time now) const {
  if (Listed(host)) {
    NodeExclusion listed;
    if (auto it = hosts_.find(Key(host)); it != hosts_.end()) listed = it->second.record;
    listed.host = host;
    listed.reason = kListedReason;
    listed.until = absl::InfiniteFuture();
    return listed;
  }
  auto it = hosts_.find(Key(host));
  if (it == hosts_.end() || it->second.record.times_excluded == 0 ||
      now >= it->second.record.until) {
    return std::nullopt;
  }
  return it->second.record;
}

std::optional<NodeExclusion> NodeHealth::KeepOut(const std::string& host, absl::Time now) {
  if (Listed(host) && hosts_.count(Key(host)) == 0) {
    Ledger& ledger = Of(host);
    ledger.record.reason = kListedReason;
    ledger.record.times_excluded = 1;
  }
  return Excluded(host, now);
}

std::vector<RememberedNode> NodeHealth::Remember(absl::Time now) const {
  std::vector<RememberedNode> nodes;
  for (const auto& [key, ledger] : hosts_) {
    RememberedNode node;
    node.record = ledger.record;
    if (ledger.record.times_excluded > 0) {
      node.cooldown_left = ledger.record.until == absl::InfiniteFuture()
                               ? absl::InfiniteDuration()
                               : std::max(ledger.record.until - now, absl::ZeroDuration());
    }
    node.failures_since_admitted = ledger.failures_since_admitted;
    node.flaps_since_admitted = ledger.flaps_since_admitted;
    nodes.push_back(std::move(node));
  }
  return nodes;
}

void NodeHealth::Recall(const std::vector<RememberedNode>& nodes, absl::Time now) {
  for (const RememberedNode& node : nodes) {
    if (node.record.host.empty()) continue;
    Ledger& ledger = Of(node.record.host);
    ledger.record = node.record;
    ledger.record.until = node.cooldown_left == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                                                         : now + node.cooldown_left;
    ledger.failures_since_admitted = node.failures_since_admitted;
    ledger.flaps_since_admitted = node.flaps_since_admitted;
  }
}

NodeExclusion NodeHealth::Counts(const std::string& host) const {
  auto it = hosts_.find(Key(host));
  if (it != hosts_.end()) return it->second.record;
  NodeExclusion none;
  none.host = host;
  return none;
}

std::vector<NodeExclusion> NodeHealth::Record() const {
  std::vector<NodeExclusion> out;
  for (const auto& [host, ledger] : hosts_) {
    if (ledger.record.times_excluded > 0) out.push_back(ledger.record);
  }
  std::sort(out.begin(), out.end(), [](const NodeExclusion& a, const NodeExclusion& b) {
    return NaturalLess(a.host, b.host);
  });
  return out;
}

absl::Duration NodeHealth::CooldownLeft(const NodeExclusion& exclusion, absl::Time now) {
  if (exclusion.until == absl::InfiniteFuture()) return absl::InfiniteDuration();
  return std::max(absl::ZeroDuration(), exclusion.until - now);
}

std::string NodeHealth::Describe(const NodeExclusion& exclusion, absl::Time now) {
  std::string when;
  if (exclusion.until == absl::InfiniteFuture()) {
    when = "excluded for the rest of the job";
  } else if (exclusion.until > now) {
    when = absl::StrCat("excluded for another ",
                        absl::FormatDuration(absl::Trunc(exclusion.until - now, absl::Seconds(1))),
                        " (--node-cooldown)");
  } else {
    when = "was excluded, admitted again after its cooldown";
  }
  std::vector<std::string> counts;
  if (exclusion.failures > 0) counts.push_back(Plural(exclusion.failures, "failure", "failures"));
  if (exclusion.flaps > 0)
    counts.push_back(Plural(exclusion.flaps, "lost connection", "lost connections"));
  if (exclusion.failed_checks > 0) {
    counts.push_back(
        Plural(exclusion.failed_checks, "failed health check", "failed health checks"));
  }
  return absl::StrCat(exclusion.host, ": ", when, ": ", exclusion.reason,
                      counts.empty() ? "" : " [", absl::StrJoin(counts, ", "),
                      counts.empty() ? "" : "]");
}

}  // namespace ddprun
