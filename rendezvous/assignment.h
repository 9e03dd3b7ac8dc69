#pragma once
// Assignment: what a node runs in a round, as the master that began the round gave it. The
// round state machine makes them, agents run them and send them back when they resume, and
// round_proof proves them.

#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace ddprun
