#pragma once
// The protocol's words (docs/protocol.md): what an agent says of itself when it joins
// (NodeInfo) and of a failed worker (ReportedFailure), why a round stops (StopReason), how a
// run ends (RunOutcome), and what a master hands the master that takes its run over
// (RunMemory). Agents, masters and the wire speak them; the master's rules
// (round_state_machine.h) are one user among others.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "rendezvous/assignment.h"
#include "rendezvous/node_health.h"

namespace ddprun {

/// The most workers one run may have: RANK and WORLD_SIZE are 32-bit integers in workers.
inline constexpr int64_t kMaxWorldSize = int64_t{1} << 30;

/// What an agent says about itself when it joins.
struct NodeInfo {
  std::string host;           // for ordering and messages
  std::string addr;           // where its TCPStore is reached (MASTER_ADDR if group rank 0)
  std::string fallback_addr;  // its host name when that is not loopback there (see node_address.h)
  int pid = 0;
  std::string incarnation;  // random per agent process: tells a restarted agent apart
  int local_world_size = 1;
  int node_rank_hint = -1;  // --node-rank when given, else -1
  int master_port = 0;      // its TCPStore's port, for MASTER_PORT if it is rank 0
  // Where this agent's run was when it (re)joined, for a master that restarted: the last
  // round it ran (-1: none) and the TORCHELASTIC_RESTART_COUNT it had.
  int64_t last_round = -1;
  int restarts_seen = 0;
  // Its health check failed: why, with the check's last lines. It does not join; it is kept
  // out for the cooldown and told so.
  std::string failed_check;
  // Where its workers' connections come from: its own IP addresses, and the one its session
  // came from (the master adds it). Group rank 0's TCPStore serves these only.
  std::vector<std::string> addresses;
  // The address its session came from, as the master saw it (not what the node says).
  std::string seen_from;
  // Its agent runs a next round sent with a stop order (Outbound::next) without joining, and
  // its workers' store keeps one port for every round: it may be restarted in place.
  bool restarts_in_place = false;
  // It lost its master while its workers ran, and they still do: the round they run. The
  // master gives it its place back (Resume), or orders it to stop when that round is over.
  std::optional<Assignment> resume;
};

/// One failed worker, as an agent reports it.
struct ReportedFailure {
  std::string host;
  int rank = 0;
  int local_rank = 0;
  int exit_code = 0;  // torchrun's: -N for signal N
  int pid = 0;
  absl::Time time;
  std::string message;     // error-file message or the stderr tail, already formatted
  bool hung = false;       // stopped by the agent as hung: every node records its stacks
  bool timer = false;      // hung because a FileTimer expired (else: no heartbeat)
  bool peer_lost = false;  // it died because a peer went away: a consequence, not a cause
};

/// The order in which failures are taken for the root cause: one that failed on its own
/// before one that died because a peer went away, then the earlier.
inline bool RootCauseBefore(const ReportedFailure& a, const ReportedFailure& b) {
  if (a.peer_lost != b.peer_lost) return !a.peer_lost;
  return a.time < b.time;
}

/// Why a worker failed, in a word: "timer" (a FileTimer expired), "hang" (its heartbeat
/// stopped), "signal" or "exit_code".
inline const char* FailureCause(const ReportedFailure& f) {
  return f.hung ? (f.timer ? "timer" : "hang") : f.exit_code < 0 ? "signal" : "exit_code";
}

enum class StopReason { kWorkerFailed, kMembershipChanged, kRunEnded };

// kReleased: for one node only, whose workers succeeded while others still run, once the
// exit barrier has timed out.
// kStopped: an operator ended the run (`ddprun stop`).
enum class RunOutcome { kSucceeded, kFailed, kTimedOut, kReleased, kStopped };

/// What a run's master must not forget when another master takes the run over (an elected
/// leader's successor, docs/architecture.md, LeaderElection): the restarts spent and every node's
/// health ledger. The round and the restarts also come back with the agents' joins and resumes; the
/// ledgers only come with this.
struct RunMemory {
  int restarts_spent = 0;
  std::vector<RememberedNode> nodes;
  std::string run_incarnation;  // the run it is of (Assignment::run_incarnation)
};

}  // namespace ddprun
