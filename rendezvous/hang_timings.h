#pragma once
// HangTimings: every bound of the hang protocol (docs/hangs.md, "Where every rank was"), in
// one place. The agent's rules, its stack collection and the master's report gathering each
// read theirs from here; the table in docs/hangs.md lists the same values.

#include "absl/time/time.h"

namespace ddprun {

struct HangTimings {
  // Between nodes: how long every node gets to stop its workers where they are before any
  // node takes stacks, so that no hung rank's peer sees it die first. Zero on one node.
  absl::Duration freeze_settle = absl::Milliseconds(200);
  // How long the stack dumps may take; then the stop goes on without the missing ones.
  absl::Duration dump_bound = absl::Seconds(3);
  // The master: how long after the first node's stacks it sends the merged report, complete
  // or not (a node that died must not keep the others waiting).
  absl::Duration gather = absl::Seconds(3);
  // A node whose own report lacks other nodes' ranks: how long it waits, once the run is
  // over for it, for the master's merged report before it exits.
  absl::Duration report_wait = absl::Seconds(5);
};

}  // namespace ddprun
