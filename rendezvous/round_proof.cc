// The round digest and place proofs (round_proof.h). Each hash is tagged with what it hashes
// (a leaf, an inner node of the tree, the digest), so that no value of one kind passes for
// another. A level of odd size carries its last hash up unpaired: the verifier knows the
// tree's shape from group_world_size.
#include "rendezvous/round_proof.h"

#include <openssl/evp.h>

#include <type_traits>

#include "absl/strings/str_cat.h"

namespace ddprun {

namespace {

std::string Sha256(absl::string_view data) {
  std::string out(kRoundDigestBytes, '\0');
  unsigned int size = 0;
  EVP_Digest(data.data(), data.size(), reinterpret_cast<unsigned char*>(out.data()), &size,
             EVP_sha256(), nullptr);
  return out;
}

std::string Leaf(int group_rank, int base_rank, absl::string_view incarnation) {
  return Sha256(absl::StrCat("ddprun place\n", group_rank, "\n", base_rank, "\n", incarnation));
}

std::string Inner(absl::string_view left, absl::string_view right) {
  return Sha256(absl::StrCat("ddprun node\n", left, right));
}

// The round's numbers (the fields kInDigest, in the table's order, a line each) and the
// root of its tree of places.
std::string Digest(const Assignment& a, absl::string_view root) {
  std::string text = "ddprun round\n";
  ForEachAssignmentField(a, [&](const AssignmentField& field, const auto& value) {
    using Value = std::decay_t<decltype(value)>;
    if constexpr (!std::is_same_v<Value, std::vector<std::string>>) {
      if (field.proof == Proof::kInDigest) absl::StrAppend(&text, value, "\n");
    }
  });
  return Sha256(absl::StrCat(text, root));
}

}  // namespace

void ProveRound(const std::vector<Assignment*>& assignments,
                const std::vector<absl::string_view>& incarnations) {
  if (assignments.empty()) return;
  std::vector<std::vector<std::string>> levels(1);
  for (size_t g = 0; g < assignments.size(); ++g) {
    levels[0].push_back(Leaf(static_cast<int>(g), assignments[g]->base_rank, incarnations[g]));
  }
  while (levels.back().size() > 1) {
    const std::vector<std::string>& below = levels.back();
    std::vector<std::string> above;
    for (size_t i = 0; i < below.size(); i += 2) {
      above.push_back(i + 1 < below.size() ? Inner(below[i], below[i + 1]) : below[i]);
    }
    levels.push_back(std::move(above));
  }
  const std::string digest = Digest(*assignments[0], levels.back()[0]);
  for (size_t g = 0; g < assignments.size(); ++g) {
    Assignment& a = *assignments[g];
    a.round_digest = digest;
    a.place_proof.clear();
    size_t at = g;
    for (size_t level = 0; level + 1 < levels.size(); ++level, at /= 2) {
      if (size_t sibling = at ^ 1; sibling < levels[level].size()) {
        a.place_proof.push_back(levels[level][sibling]);
      }
    }
  }
}

bool ProofHolds(const Assignment& resumed, absl::string_view incarnation) {
  if (resumed.group_rank < 0 || resumed.group_rank >= resumed.group_world_size ||
      resumed.round_digest.size() != kRoundDigestBytes) {
    return false;
  }
  std::string hash = Leaf(resumed.group_rank, resumed.base_rank, incarnation);
  size_t at = static_cast<size_t>(resumed.group_rank);
  size_t used = 0;
  for (size_t size = static_cast<size_t>(resumed.group_world_size); size > 1;
       size = (size + 1) / 2, at /= 2) {
    if ((at ^ 1) >= size) continue;  // the last of an odd level: carried up unpaired
    if (used == resumed.place_proof.size()) return false;
    const std::string& sibling = resumed.place_proof[used++];
    hash = at % 2 == 0 ? Inner(hash, sibling) : Inner(sibling, hash);
  }
  return used == resumed.place_proof.size() && Digest(resumed, hash) == resumed.round_digest;
}

}  // namespace ddprun
