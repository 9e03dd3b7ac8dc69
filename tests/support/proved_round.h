#pragma once
// The assignments one round's master gave its members, proofs included (round_proof.h), for
// tests whose agents resume a round their master began: group rank g's agent has incarnation
// `incarnations[g]` and world_size / N workers; group rank 0's store is master_addr:port.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "rendezvous/round_proof.h"

namespace ddprun::testing {

struct RoundOf {
  int64_t round = 0;
  int restart_count = 0;
  int world_size = 0;
  std::vector<std::string> incarnations;  // by group rank
  std::string master_addr;
  int master_port = 0;
  std::string run_incarnation;
};

inline std::vector<Assignment> ProvedRound(const RoundOf& of) {
  const int nodes = static_cast<int>(of.incarnations.size());
  std::vector<Assignment> round(of.incarnations.size());
  std::vector<Assignment*> proved;
  for (int g = 0; g < nodes; ++g) {
    Assignment& a = round[g];
    a.round = of.round;
    a.restart_count = of.restart_count;
    a.group_rank = g;
    a.group_world_size = nodes;
    a.base_rank = g * of.world_size / nodes;
    a.world_size = of.world_size;
    a.master_addr = of.master_addr;
    a.master_port = of.master_port;
    a.run_incarnation = of.run_incarnation;
    proved.push_back(&a);
  }
  ProveRound(proved, {of.incarnations.begin(), of.incarnations.end()});
  return round;
}

}  // namespace ddprun::testing
