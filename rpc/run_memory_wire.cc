#include "rpc/run_memory_wire.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/printable.h"
#include "ddprun/v1/rendezvous.pb.h"

namespace ddprun {
namespace {

// A host's name as a join may give it (wire_checks); nodes: as many as a run may have
// (kMaxNodes, rendezvous_settings.h).
constexpr size_t kMaxHost = 255;
constexpr size_t kMaxReason = 64 * 1024;
constexpr double kMaxCooldownMs = 366.0 * 24 * 3600 * 1000;  // --node-cooldown's bound is lower

absl::Status OutOfBounds(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("run memory: ", field, " ", what));
}

absl::Status CheckCount(const char* field, int value) {
  if (value < 0) return OutOfBounds(field, absl::StrCat("is ", value, ": it must be >= 0"));
  return absl::OkStatus();
}

}  // namespace

std::string RunMemoryToBytes(const RunMemory& memory) {
  v1::RunMemory wire;
  wire.set_restarts_spent(memory.restarts_spent);
  wire.set_run_incarnation(memory.run_incarnation);
  for (const RememberedNode& node : memory.nodes) {
    v1::RememberedNode* out = wire.add_nodes();
    out->set_host(node.record.host);
    out->set_reason(node.record.reason);
    out->set_failures(node.record.failures);
    out->set_flaps(node.record.flaps);
    out->set_failed_checks(node.record.failed_checks);
    out->set_times_excluded(node.record.times_excluded);
    out->set_cooldown_left_ms(node.cooldown_left == absl::InfiniteDuration()
                                  ? -1
                                  : absl::ToDoubleMilliseconds(node.cooldown_left));
    out->set_failures_since_admitted(node.failures_since_admitted);
    out->set_flaps_since_admitted(node.flaps_since_admitted);
  }
  return wire.SerializeAsString();
}

absl::StatusOr<RunMemory> RunMemoryFromBytes(const std::string& bytes) {
  v1::RunMemory wire;
  if (!wire.ParseFromString(bytes)) {
    return absl::InvalidArgumentError("run memory: not a RunMemory message");
  }
  if (wire.nodes_size() > kMaxNodes) {
    return OutOfBounds("nodes",
                       absl::StrCat("holds ", wire.nodes_size(), ", more than ", kMaxNodes));
  }
  if (absl::Status s = CheckCount("restarts_spent", wire.restarts_spent()); !s.ok()) return s;
  if (wire.run_incarnation().size() > kMaxRunIncarnation ||
      Printable(wire.run_incarnation()) != wire.run_incarnation()) {
    return OutOfBounds("run_incarnation",
                       absl::StrCat("is not up to ", kMaxRunIncarnation, " printable characters"));
  }
  RunMemory memory;
  memory.restarts_spent = wire.restarts_spent();
  memory.run_incarnation = wire.run_incarnation();
  for (const v1::RememberedNode& in : wire.nodes()) {
    if (in.host().empty() || in.host().size() > kMaxHost) {
      return OutOfBounds("host", absl::StrCat("has ", in.host().size(), " bytes: 1 to ", kMaxHost));
    }
    if (in.reason().size() > kMaxReason) {
      return OutOfBounds(
          "reason", absl::StrCat("has ", in.reason().size(), " bytes, more than ", kMaxReason));
    }
    for (auto [field, value] : {std::pair<const char*, int>{"failures", in.failures()},
                                {"flaps", in.flaps()},
                                {"failed_checks", in.failed_checks()},
                                {"times_excluded", in.times_excluded()},
                                {"failures_since_admitted", in.failures_since_admitted()},
                                {"flaps_since_admitted", in.flaps_since_admitted()}}) {
      if (absl::Status s = CheckCount(field, value); !s.ok()) return s;
    }
    const double left = in.cooldown_left_ms();
    if (!std::isfinite(left) || (left < 0 && left != -1) || left > kMaxCooldownMs) {
      return OutOfBounds("cooldown_left_ms", absl::StrCat("is ", left, ": -1, or 0 to a year"));
    }
    RememberedNode node;
    node.record.host = in.host();
    node.record.reason = in.reason();
    node.record.failures = in.failures();
    node.record.flaps = in.flaps();
    node.record.failed_checks = in.failed_checks();
    node.record.times_excluded = in.times_excluded();
    node.cooldown_left =
        left == -1 ? absl::InfiniteDuration() : absl::Milliseconds(static_cast<int64_t>(left));
    node.failures_since_admitted = in.failures_since_admitted();
    node.flaps_since_admitted = in.flaps_since_admitted();
    memory.nodes.push_back(std::move(node));
  }
  return memory;
}

}  // namespace ddprun
