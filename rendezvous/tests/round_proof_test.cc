#include "rendezvous/round_proof.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "tests/support/proved_round.h"

namespace ddprun {
namespace {

testing::RoundOf Round(int nodes) {
  testing::RoundOf of;
  of.round = 7;
  of.restart_count = 2;
  of.world_size = 8 * nodes;
  for (int g = 0; g < nodes; ++g) of.incarnations.push_back(absl::StrCat("agent-", g));
  of.master_addr = "10.0.0.1";
  of.master_port = 29500;
  return of;
}

// The digest covers the table's kInDigest fields (rendezvous/assignment.h) in the bytes
// earlier masters wrote (round, restarts, nodes, world size, port, address, run, root), so a
// master of this version takes over a round one of the last began. The value is SHA-256 of
// those lines, computed apart from ddprun.
TEST(RoundProofTest, TheDigestIsTheOneEarlierMastersMade) {
  const std::vector<Assignment> round = testing::ProvedRound(Round(1));
  EXPECT_EQ(absl::BytesToHexString(round[0].round_digest),
            "b9d75f454d8f0103ab63f92f5510f630ca01d35c5100cb23f4b2de76c59e2a7f");
}

// A list is never in the digest: Digest skips lists, so one marked kInDigest would be
// covered by nothing.
TEST(RoundProofTest, OnlySingleValuesAreInTheDigest) {
  Assignment a;
  ForEachAssignmentField(a, [](const AssignmentField& field, const auto& value) {
    using Value = std::decay_t<decltype(value)>;
    if (std::is_same_v<Value, std::vector<std::string>>) {
      EXPECT_EQ(field.proof, Proof::kNotInDigest) << field.name;
    }
  });
}

// Every member's proof holds for its own incarnation, whatever the tree's shape (odd levels
// carry their last hash up), and every member holds the same digest.
TEST(RoundProofTest, EveryPlaceIsProvedByItsOwnAgentOnly) {
  for (int nodes : {1, 2, 3, 5, 8, 13, 100}) {
    const testing::RoundOf of = Round(nodes);
    const std::vector<Assignment> round = testing::ProvedRound(of);
    for (int g = 0; g < nodes; ++g) {
      EXPECT_TRUE(ProofHolds(round[g], of.incarnations[g])) << nodes << " nodes, place " << g;
      EXPECT_EQ(round[g].round_digest, round[0].round_digest);
      EXPECT_FALSE(ProofHolds(round[g], of.incarnations[(g + 1) % nodes]) && nodes > 1)
          << "another member's incarnation proves place " << g;
      EXPECT_FALSE(ProofHolds(round[g], "a stranger"));
    }
  }
}

// A resume whose numbers differ from what its master gave it proves nothing: no claim of
// more restarts, another group rank 0 store, another place or world passes.
TEST(RoundProofTest, NoNumberOfTheRoundCanBeChanged) {
  const testing::RoundOf of = Round(5);
  const Assignment given = testing::ProvedRound(of)[3];
  const std::vector<std::pair<const char*, std::function<void(Assignment&)>>> changes = {
      {"round", [](Assignment& a) { a.round = 8; }},
      {"restart_count", [](Assignment& a) { a.restart_count = 3; }},
      {"master_addr", [](Assignment& a) { a.master_addr = "10.0.0.66"; }},
      {"master_port", [](Assignment& a) { a.master_port = 1; }},
      {"world_size", [](Assignment& a) { a.world_size = 48; }},
      {"group_rank", [](Assignment& a) { a.group_rank = 2; }},
      {"base_rank", [](Assignment& a) { a.base_rank = 16; }},
      {"group_world_size", [](Assignment& a) { a.group_world_size = 4; }},
      {"place_proof", [](Assignment& a) { a.place_proof.pop_back(); }},
      {"round_digest", [](Assignment& a) { a.round_digest[0] ^= 1; }},
  };
  for (const auto& [field, change] : changes) {
    Assignment resumed = given;
    change(resumed);
    EXPECT_FALSE(ProofHolds(resumed, of.incarnations[3])) << field << " changed and still held";
  }
  Assignment no_digest = given;
  no_digest.round_digest.clear();
  EXPECT_FALSE(ProofHolds(no_digest, of.incarnations[3]));
  Assignment out_of_range = given;
  out_of_range.group_rank = 5;
  EXPECT_FALSE(ProofHolds(out_of_range, of.incarnations[3]));
}

}  // namespace
}  // namespace ddprun
