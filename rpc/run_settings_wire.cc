// RunSettings <-> RendezvousSettings, and the bounds of a join's settings, walking the table
// of rendezvous/rendezvous_settings.h: each setting is found in the message by its name
// (durations as `name`_ms), so a new setting needs no line here. rpc_unit_tests checks that
// the table and the message name the same fields.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "rpc/wire.h"
#include "rpc/wire_limits.h"

namespace ddprun {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Reflection;

const Reflection& Reflect() { return *v1::RunSettings::GetReflection(); }

const FieldDescriptor& FieldOf(absl::string_view name) {
  const FieldDescriptor* field = v1::RunSettings::descriptor()->FindFieldByName(std::string(name));
  // A line of the table without its field in the proto: a bug the unit test names.
  if (field == nullptr) {
    std::fprintf(stderr, "ddprun: RunSettings has no field %s\n", std::string(name).c_str());
    std::abort();
  }
  return *field;
}

// A duration is in milliseconds on the wire.
std::string WireName(const SettingField& field, const absl::Duration&) {
  return absl::StrCat(field.name, "_ms");
}

void Read(const v1::RunSettings& m, const SettingField& field, int& out) {
  out = Reflect().GetInt32(m, &FieldOf(field.name));
}
void Read(const v1::RunSettings& m, const SettingField& field, absl::Duration& out) {
  const int64_t ms = Reflect().GetInt64(m, &FieldOf(WireName(field, out)));
  out = ms == 0 && field.zero_is_forever ? absl::InfiniteDuration() : absl::Milliseconds(ms);
}
void Read(const v1::RunSettings& m, const SettingField& field, std::vector<std::string>& out) {
  const auto list = Reflect().GetRepeatedFieldRef<std::string>(m, &FieldOf(field.name));
  out.assign(list.begin(), list.end());
}

void Write(const SettingField& field, int value, v1::RunSettings& m) {
  Reflect().SetInt32(&m, &FieldOf(field.name), value);
}
void Write(const SettingField& field, absl::Duration value, v1::RunSettings& m) {
  int64_t ms = absl::ToInt64Milliseconds(value);
  // A cooldown below a millisecond must not read back as "forever".
  if (field.zero_is_forever) ms = value == absl::InfiniteDuration() ? 0 : std::max<int64_t>(1, ms);
  Reflect().SetInt64(&m, &FieldOf(WireName(field, value)), ms);
}
void Write(const SettingField& field, const std::vector<std::string>& value, v1::RunSettings& m) {
  for (const std::string& entry : value) Reflect().AddString(&m, &FieldOf(field.name), entry);
}

std::vector<absl::Status> Check(const v1::RunSettings& m, const SettingField& field,
                                const absl::Duration& kind) {
  const std::string name = WireName(field, kind);
  return {CheckRange(absl::StrCat("join.settings.", name), Reflect().GetInt64(m, &FieldOf(name)),
                     field.min, field.max)};
}
std::vector<absl::Status> Check(const v1::RunSettings& m, const SettingField& field, const int&) {
  return {CheckRange(absl::StrCat("join.settings.", field.name),
                     Reflect().GetInt32(m, &FieldOf(field.name)), field.min, field.max)};
}
// A list's entries are host names.
std::vector<absl::Status> Check(const v1::RunSettings& m, const SettingField& field,
                                const std::vector<std::string>&) {
  const std::string name = absl::StrCat("join.settings.", field.name);
  const auto list = Reflect().GetRepeatedFieldRef<std::string>(m, &FieldOf(field.name));
  std::vector<absl::Status> checks = {
      CheckRange(absl::StrCat(name, " (count)"), list.size(), field.min, field.max)};
  for (const std::string& entry : list) checks.push_back(CheckLength(name, entry, 255));
  return checks;
}

}  // namespace

RendezvousSettings FromWire(const v1::RunSettings& message) {
  RendezvousSettings settings;
  ForEachSetting(settings,
                 [&](const SettingField& field, auto& value) { Read(message, field, value); });
  return settings;
}

v1::RunSettings ToWire(const RendezvousSettings& settings) {
  v1::RunSettings message;
  ForEachSetting(settings, [&](const SettingField& field, const auto& value) {
    Write(field, value, message);
  });
  return message;
}

absl::Status CheckSettingsLimits(const v1::RunSettings& message) {
  const RendezvousSettings kinds;  // only the type of each field is read
  absl::Status first;
  ForEachSetting(kinds, [&](const SettingField& field, const auto& kind) {
    for (absl::Status& check : Check(message, field, kind)) first.Update(check);
  });
  return first;
}

}  // namespace ddprun
