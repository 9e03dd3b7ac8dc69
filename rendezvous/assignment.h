#pragma once
// Assignment: what a node runs in a round, as the master that began the round gave it. The
// round state machine makes them, agents run them and send them back when they resume, and
// round_proof proves them.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/worker_env_names.h"

namespace ddprun {

/// The longest run incarnation a master or an elected backend's store may hand over (ours are 32
/// hex digits).
inline constexpr size_t kMaxRunIncarnation = 64;

/// What a node runs in a round: the master's answer to its join.
struct Assignment {
  int64_t round = 0;
  int restart_count = 0;
  int group_rank = 0;
  int group_world_size = 0;
  int base_rank = 0;
  int world_size = 0;
  std::string master_addr;
  int master_port = 0;
  // Group rank 0 only: every member's `addresses`, once each, in order.
  std::vector<std::string> store_clients;
  // Group rank 0 of several nodes only: group rank 1's store ("host:port"). Without a
  // master, whether its host answers tells whether this node is cut off from the job.
  std::string neighbour_store;
  // What proves this node's place to a master that did not begin the round (round_proof.h):
  // the round's digest, and the hashes from its place up to the digest's tree root.
  std::string round_digest;
  std::vector<std::string> place_proof;
  // The run the round is of: random, made by the master that began the run, kept by every
  // master that takes it over. An elected leader's successor checks the state in its store by it.
  std::string run_incarnation;
};

/// How a master that did not begin the round checks a field of an Assignment a node brings
/// back (round_proof.h): the same on every node of the round and covered by its digest, or
/// not (this node's own place, which its leaf proves, or what the master makes anew).
enum class Proof { kInDigest, kNotInDigest };

/// One field of Assignment, as ForEachAssignmentField describes it.
struct AssignmentField {
  const char* name;  // its name in the wire's RoundAssignment
  Proof proof;
  std::array<const char*, 2> variables;  // the worker variables it is exported as (null: none)
};

/// Calls visit(AssignmentField, field) for each field of `a` (an Assignment, const or not).
/// rpc/assignment_wire.cc converts them by their names, round_proof.cc digests those
/// kInDigest in this order, and agent/worker_env.cc exports each as its variables: a value
/// the master decides for every worker is a field, its line here and its proto field.
template <typename A, typename Visit>
void ForEachAssignmentField(A& a, Visit&& visit) {
  using P = Proof;
  namespace env = worker_env;
  visit(AssignmentField{"round", P::kInDigest, {env::kRound}}, a.round);
  visit(AssignmentField{"restart_count", P::kInDigest, {env::kRestartCount}}, a.restart_count);
  visit(AssignmentField{"group_world_size", P::kInDigest, {env::kGroupWorldSize}},
        a.group_world_size);
  visit(AssignmentField{"world_size", P::kInDigest, {env::kWorldSize, env::kRoleWorldSize}},
        a.world_size);
  visit(AssignmentField{"master_port", P::kInDigest, {env::kMasterPort}}, a.master_port);
  visit(AssignmentField{"master_addr", P::kInDigest, {env::kMasterAddr}}, a.master_addr);
  visit(AssignmentField{"run_incarnation", P::kInDigest, {}}, a.run_incarnation);
  // This node's place: its leaf in the round's tree proves it.
  visit(AssignmentField{"group_rank", P::kNotInDigest, {env::kGroupRank}}, a.group_rank);
  visit(AssignmentField{"base_rank", P::kNotInDigest, {}}, a.base_rank);
  // What the master makes for the node anew, and the proof itself.
  visit(AssignmentField{"store_clients", P::kNotInDigest, {}}, a.store_clients);
  visit(AssignmentField{"neighbour_store", P::kNotInDigest, {}}, a.neighbour_store);
  visit(AssignmentField{"round_digest", P::kNotInDigest, {}}, a.round_digest);
  visit(AssignmentField{"place_proof", P::kNotInDigest, {}}, a.place_proof);
}

}  // namespace ddprun
