// RoundAssignment <-> Assignment, walking the table of rendezvous/assignment.h: each field
// is found in the message by its name, so a new field needs no line here. rpc_unit_tests
// checks that the table and the message name the same fields.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "rpc/wire.h"

namespace ddprun {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Reflection;

const Reflection& AssignmentReflection() { return *v1::RoundAssignment::GetReflection(); }

const FieldDescriptor& AssignmentFieldOf(const AssignmentField& entry) {
  const FieldDescriptor* field = v1::RoundAssignment::descriptor()->FindFieldByName(entry.name);
  // A line of the table without its field in the proto: a bug the unit test names.
  if (field == nullptr) {
    std::fprintf(stderr, "ddprun: RoundAssignment has no field %s\n", entry.name);
    std::abort();
  }
  return *field;
}

void Read(const v1::RoundAssignment& m, const AssignmentField& entry, int64_t& out) {
  out = AssignmentReflection().GetInt64(m, &AssignmentFieldOf(entry));
}
void Read(const v1::RoundAssignment& m, const AssignmentField& entry, int& out) {
  out = AssignmentReflection().GetInt32(m, &AssignmentFieldOf(entry));
}
void Read(const v1::RoundAssignment& m, const AssignmentField& entry, std::string& out) {
  out = AssignmentReflection().GetString(m, &AssignmentFieldOf(entry));
}
void Read(const v1::RoundAssignment& m, const AssignmentField& entry,
          std::vector<std::string>& out) {
  const auto list =
      AssignmentReflection().GetRepeatedFieldRef<std::string>(m, &AssignmentFieldOf(entry));
  out.assign(list.begin(), list.end());
}

void Write(const AssignmentField& entry, int64_t value, v1::RoundAssignment& m) {
  AssignmentReflection().SetInt64(&m, &AssignmentFieldOf(entry), value);
}
void Write(const AssignmentField& entry, int value, v1::RoundAssignment& m) {
  AssignmentReflection().SetInt32(&m, &AssignmentFieldOf(entry), value);
}
void Write(const AssignmentField& entry, const std::string& value, v1::RoundAssignment& m) {
  AssignmentReflection().SetString(&m, &AssignmentFieldOf(entry), value);
}
void Write(const AssignmentField& entry, const std::vector<std::string>& value,
           v1::RoundAssignment& m) {
  for (const std::string& item : value)
    AssignmentReflection().AddString(&m, &AssignmentFieldOf(entry), item);
}

}  // namespace

void AssignmentToWire(const Assignment& assignment, v1::RoundAssignment& message) {
  ForEachAssignmentField(assignment, [&](const AssignmentField& entry, const auto& value) {
    Write(entry, value, message);
  });
}

Assignment AssignmentFromWire(const v1::RoundAssignment& message) {
  Assignment assignment;
  ForEachAssignmentField(
      assignment, [&](const AssignmentField& entry, auto& value) { Read(message, entry, value); });
  return assignment;
}

}  // namespace ddprun
