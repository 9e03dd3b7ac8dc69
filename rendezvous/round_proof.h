#pragma once
// What a round's assignments prove to a master that did not begin the round (a restarted
// ddprun-master, an elected leader's successor): the master that begins a round gives every
// member the round's digest and the member's own proof of its place. The digest is a SHA-256
// over the round's numbers (round, restarts, nodes, world size, group rank 0's store, the
// run incarnation) and a
// Merkle tree whose leaf G is group rank G's base rank and incarnation (random per agent
// process, known to that agent and the master only). A resume that carries them names its
// place by something only its agent has; resumes whose digests are equal are of one round,
// with one set of numbers (docs/protocol.md, "Losing the master"). Pure: hashing only.

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "rendezvous/assignment.h"

namespace ddprun {

/// The size of a round digest and of each step of a place proof, in bytes.
inline constexpr size_t kRoundDigestBytes = 32;

/// Fills `round_digest` and `place_proof` of every assignment of one round: `assignments[g]`
/// is group rank g's, whose agent's incarnation is `incarnations[g]`. The round's numbers
/// are group rank 0's assignment's; every assignment must have them.
void ProveRound(const std::vector<Assignment*>& assignments,
                const std::vector<absl::string_view>& incarnations);

/// Whether `resumed` (a resume's assignment) proves that the agent of `incarnation` held
/// place `resumed.group_rank` of the round `resumed.round_digest` names, with these numbers.
bool ProofHolds(const Assignment& resumed, absl::string_view incarnation);

}  // namespace ddprun
