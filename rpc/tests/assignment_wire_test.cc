#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "rpc/wire.h"

namespace ddprun {
namespace {

// Every value differs from its default, so a field the table forgets stays at its default on
// the way back and the comparison fails.
Assignment UnusualAssignment() {
  Assignment a;
  a.round = int64_t{1} << 40;
  a.restart_count = 3;
  a.group_rank = 4;
  a.group_world_size = 5;
  a.base_rank = 32;
  a.world_size = 40;
  a.master_addr = "10.1.2.3";
  a.master_port = 29511;
  a.store_clients = {"10.1.2.3", "10.1.2.4"};
  a.neighbour_store = "10.1.2.5:29600";
  a.round_digest = std::string(32, '\x7f');
  a.place_proof = {std::string(32, '\x01'), std::string(32, '\x02')};
  a.run_incarnation = "feedface";
  return a;
}

// Every field of the table as "name=value" lines (a list's items joined by commas).
std::string AssignmentText(const Assignment& a) {
  std::string text;
  ForEachAssignmentField(a, [&](const AssignmentField& field, const auto& value) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::vector<std::string>>) {
      absl::StrAppend(&text, field.name, "=", absl::StrJoin(value, ","), "\n");
    } else {
      absl::StrAppend(&text, field.name, "=", value, "\n");
    }
  });
  return text;
}

TEST(AssignmentWireTest, EveryFieldMakesTheRoundTrip) {
  const Assignment sent = UnusualAssignment();
  v1::RoundAssignment message;
  AssignmentToWire(sent, message);
  EXPECT_EQ(message.round(), int64_t{1} << 40);
  EXPECT_EQ(message.master_addr(), "10.1.2.3");
  EXPECT_EQ(message.place_proof_size(), 2);
  EXPECT_EQ(AssignmentText(AssignmentFromWire(message)), AssignmentText(sent));
  EXPECT_NE(AssignmentText(Assignment()), AssignmentText(sent));
}

TEST(AssignmentWireTest, TheTableAndTheMessageNameTheSameFields) {
  std::set<std::string> from_table;
  const Assignment a;
  ForEachAssignmentField(
      a, [&](const AssignmentField& field, const auto&) { from_table.insert(field.name); });
  std::set<std::string> in_proto;
  const auto* descriptor = v1::RoundAssignment::descriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) in_proto.insert(descriptor->field(i)->name());
  EXPECT_EQ(from_table, in_proto);
}

}  // namespace
}  // namespace ddprun
