// The bounds every message from an agent is checked against before it touches a run
// (docs/protocol.md#checks-on-join, docs/security.md): lengths, ranges, and text that the
// master relays or logs.
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/ip_address.h"
#include "rendezvous/round_proof.h"
#include "rpc/wire.h"
#include "rpc/wire_limits.h"

namespace ddprun {

absl::Status CheckLength(const std::string& field, const std::string& value, size_t limit) {
  if (value.size() <= limit) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, " has ", value.size(), " bytes; the limit is ", limit));
}

absl::Status CheckRange(const std::string& field, int64_t value, int64_t lo, int64_t hi) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, " is ", value, "; it must be in [", lo, ", ", hi, "]"));
}

namespace {

// An address the master relays to every worker as MASTER_ADDR, or a host name it puts in
// messages: nothing else than a host or an address may pass (a newline would forge lines).
absl::Status CheckText(const char* field, const std::string& value, bool may_be_empty) {
  if ((may_be_empty && value.empty()) || IsHostOrAddressText(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field, " is '", absl::CEscape(value.substr(0, 64)),
      "'; it must be a host name or an IP address (letters, digits, '.', '-', '_', ':')"));
}

constexpr int64_t kMaxNodeAddresses = 64;

// A time an agent measured: no restart or outage lasts a day (NaN fails too).
absl::Status CheckMilliseconds(const char* field, double ms) {
  constexpr int64_t kDayMs = 86400e3;
  if (ms >= 0 && ms <= kDayMs) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, " is ", ms, "; it must be in [", 0, ", ", kDayMs, "]"));
}

// A resume: the round the agent runs, as its master gave it, less what the master has no use
// for (store_clients, neighbour_store).
void CheckResume(const v1::RoundAssignment& r, std::vector<absl::Status>& checks) {
  for (absl::Status s :
       {CheckRange("join.resume.round", r.round(), 0, int64_t{1} << 40),
        CheckRange("join.resume.group_world_size", r.group_world_size(), 1, kMaxNodes),
        CheckRange("join.resume.group_rank", r.group_rank(), 0, r.group_world_size() - 1),
        CheckRange("join.resume.restart_count", r.restart_count(), 0, 1 << 30),
        CheckRange("join.resume.base_rank", r.base_rank(), 0, int64_t{1} << 30),
        CheckRange("join.resume.world_size", r.world_size(), 1, int64_t{1} << 30),
        CheckLength("join.resume.master_addr", r.master_addr(), 255),
        CheckRange("join.resume.store_clients (count)", r.store_clients_size(), 0, 0),
        CheckLength("join.resume.neighbour_store", r.neighbour_store(), 0),
        CheckLength("join.resume.round_digest", r.round_digest(), kRoundDigestBytes),
        CheckLength("join.resume.run_incarnation", r.run_incarnation(), kMaxRunIncarnation),
        // One step per level of a tree of kMaxNodes leaves.
        CheckRange("join.resume.place_proof (count)", r.place_proof_size(), 0, 20)}) {
    checks.push_back(std::move(s));
  }
  for (const std::string& step : r.place_proof()) {
    checks.push_back(CheckLength("join.resume.place_proof", step, kRoundDigestBytes));
  }
}

}  // namespace

absl::Status CheckLimits(const v1::AgentMessage& message) {
  std::vector<absl::Status> checks;
  if (message.has_join()) {
    const v1::Join& j = message.join();
    const v1::RunSettings& s = j.settings();
    checks = {
        CheckLength("join.run_id", j.run_id(), 256), CheckLength("join.token", j.token(), 4096),
        CheckLength("join.node.host", j.node().host(), 255),
        CheckLength("join.node.addr", j.node().addr(), 255),
        CheckLength("join.node.fallback_addr", j.node().fallback_addr(), 255),
        CheckLength("join.node.incarnation", j.node().incarnation(), 64),
        CheckText("join.node.host", j.node().host(), /*may_be_empty=*/false),
        CheckText("join.node.addr", j.node().addr(), /*may_be_empty=*/true),
        CheckText("join.node.fallback_addr", j.node().fallback_addr(), /*may_be_empty=*/true),
        CheckRange("join.local_world_size", j.local_world_size(), 1, 1 << 16),
        CheckRange("join.node_rank_hint", j.node_rank_hint(), -1, kMaxNodes),
        // 0 is no port: a node given group rank 0 with it would end every other node.
        CheckRange("join.master_port", j.master_port(), 1, 65535),
        CheckRange("join.node.addresses (count)", j.node().addresses_size(), 0, kMaxNodeAddresses),
        CheckRange("join.next_round", j.next_round(), 0, int64_t{1} << 40),
        CheckRange("join.restarts_seen", j.restarts_seen(), 0, 1 << 30), CheckSettingsLimits(s),
        // The one bound across settings.
        CheckRange("join.settings.max_nodes", s.max_nodes(), s.min_nodes(), kMaxNodes),
        CheckLength("join.failed_check", j.failed_check(), 8192)};
    if (j.has_resume()) CheckResume(j.resume(), checks);
    for (const std::string& address : j.node().addresses()) {
      // An IPv6 address with its zone ("fe80::1%eth0") fits in 64 bytes; a longer zone is
      // none an interface has.
      checks.push_back(CheckLength("join.node.addresses", address, 64));
      if (CanonicalIp(address).empty()) {
        checks.push_back(absl::InvalidArgumentError(
            absl::StrCat("join.node.addresses has '", absl::CEscape(address.substr(0, 64)),
                         "'; each must be an IP address")));
      }
    }
  } else if (message.has_report()) {
    const v1::WorkerReport& r = message.report();
    checks.push_back(CheckRange("report.failures (count)", r.failures_size(), 0, 1 << 16));
    for (const v1::WorkerFailure& f : r.failures()) {
      checks.push_back(CheckLength("report.failures.host", f.host(), 255));
      checks.push_back(CheckLength("report.failures.message", f.message(), 64 * 1024));
    }
  } else if (message.has_stacks()) {
    const v1::StackReport& r = message.stacks();
    checks.push_back(CheckRange("stacks.stacks (count)", r.stacks_size(), 0, 1 << 16));
    checks.push_back(CheckRange("stacks.world_size", r.world_size(), 1, int64_t{1} << 30));
    checks.push_back(CheckLength("stacks.cause", r.cause(), 4096));
    for (const v1::RankStack& s : r.stacks()) {
      checks.push_back(CheckLength("stacks.stacks.host", s.host(), 255));
      checks.push_back(CheckLength("stacks.stacks.source", s.source(), 16));
      checks.push_back(CheckLength("stacks.stacks.where", s.where(), 1024));
      checks.push_back(CheckLength("stacks.stacks.text", s.text(), kMaxStackText));
      checks.push_back(CheckRange("stacks.stacks.frames (count)", s.frames_size(), 0, 1024));
    }
  } else if (message.has_leave()) {
    checks.push_back(CheckLength("leave.reason", message.leave().reason(), 4096));
  } else if (message.has_outage()) {
    checks.push_back(CheckRange("outage.round", message.outage().round(), 0, int64_t{1} << 40));
    checks.push_back(CheckMilliseconds("outage.lost_ms", message.outage().lost_ms()));
  } else if (message.has_restart()) {
    const v1::RestartSplit& r = message.restart();
    checks.push_back(CheckRange("restart.round", r.round(), 0, int64_t{1} << 40));
    checks.push_back(CheckRange("restart.restart_count", r.restart_count(), 0, 1 << 30));
    for (const auto& [field, ms] : {std::pair{"restart.total_ms", r.total_ms()},
                                    {"restart.detection_ms", r.detection_ms()},
                                    {"restart.stop_ms", r.stop_ms()},
                                    {"restart.rendezvous_ms", r.rendezvous_ms()},
                                    {"restart.spawn_ms", r.spawn_ms()},
                                    {"restart.connected_ms", r.connected_ms()},
                                    {"restart.barrier_ms", r.barrier_ms()}}) {
      checks.push_back(CheckMilliseconds(field, ms));
    }
  }
  for (absl::Status& s : checks) {
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.message(),
                       ": the master refuses the message (is this a ddprun agent "
                       "of the same version?)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace ddprun
