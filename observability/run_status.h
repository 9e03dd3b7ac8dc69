#pragma once
// What the master shows of a run: a status (admin.proto's RunStatus) built from its
// RoundStateMachine, for `ddprun status`, the status page and the master's metrics. Pure.

#include <string>

#include "absl/time/time.h"
#include "ddprun/v1/admin.pb.h"
#include "google/protobuf/message.h"
#include "rendezvous/round_state_machine.h"

namespace ddprun {

/// The clocks a status is read with: the state machine's (monotonic) time, and the wall
/// time at the same instant, to show when things happened.
struct StatusClock {
  absl::Time monotonic;
  absl::Time wall;
  double WallSeconds(absl::Time monotonic_time) const;
};

/// Without `lists`, the counts only (node_states, excluded_now, worker_failures) and the
/// last failure, not the nodes, the hosts kept out and the rounds: what the metrics read at
/// each scrape, without the cost of a line per node.
v1::RunStatus RunStatusOf(const std::string& run_id, const RoundStateMachine& rounds,
                          const StatusClock& clock, bool lists = true);

/// `message` (a StatusReply, or an error Struct) in the status schema's JSON: protobuf's JSON
/// mapping with admin.proto's field names and every scalar present; `indent` for a person.
std::string StatusJson(const google::protobuf::Message& message, bool indent);

/// The status as a person reads it at a glance (`ddprun status`): one run, or a line per run.
std::string FormatRunStatus(const v1::RunStatus& run);
std::string FormatRunList(const v1::StatusReply& reply);

}  // namespace ddprun
