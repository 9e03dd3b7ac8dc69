#include "rendezvous/rendezvous_settings.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace ddprun {

std::string OptionOf(const SettingField& field) {
  return field.option != nullptr ? field.option : absl::StrCat("--rdzv-conf ", field.name);
}

std::string SettingText(int value) { return absl::StrCat(value); }
std::string SettingText(absl::Duration value) { return absl::FormatDuration(value); }
// A list is shown by its first entries: the status must not grow with what a joiner sent
// (4096 host names of 255 bytes pass the join's checks).
std::string SettingText(const std::vector<std::string>& value) {
  constexpr size_t kShown = 8;
  if (value.size() <= kShown) return absl::StrJoin(value, ",");
  return absl::StrCat(absl::StrJoin(value.begin(), value.begin() + kShown, ","), ",... (",
                      value.size(), " in all)");
}

std::map<std::string, std::string> SettingsAsText(const RendezvousSettings& settings) {
  std::map<std::string, std::string> text;
  ForEachSetting(settings, [&](const SettingField& field, const auto& value) {
    text[field.name] = SettingText(value);
  });
  return text;
}

namespace {

// The fields of `agreement` as a user gives them: "--nnodes=2:4 --max-restarts=0". Fields
// given by one option (--nnodes MIN:MAX) are one word, their values joined by ':'.
std::string GivenAs(const RendezvousSettings& settings, Agreement agreement) {
  std::vector<std::pair<std::string, std::string>> given;
  ForEachSetting(settings, [&](const SettingField& field, const auto& value) {
    if (field.agreement != agreement) return;
    if (!given.empty() && given.back().first == OptionOf(field)) {
      absl::StrAppend(&given.back().second, ":", SettingText(value));
    } else {
      given.emplace_back(OptionOf(field), SettingText(value));
    }
  });
  return absl::StrJoin(given, " ", absl::PairFormatter("="));
}

bool SameFields(const RendezvousSettings& run, const RendezvousSettings& joiner,
                Agreement agreement) {
  return GivenAs(run, agreement) == GivenAs(joiner, agreement);
}

}  // namespace

absl::Status SameJobSettings(const RendezvousSettings& run, const RendezvousSettings& joiner) {
  if (SameFields(run, joiner, Agreement::kJob)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "this node was started with ", GivenAs(joiner, Agreement::kJob), " but the run uses ",
      GivenAs(run, Agreement::kJob), ": start every node with the same values"));
}

absl::Status SameRunSettings(const RendezvousSettings& run, const RendezvousSettings& joiner) {
  DDPRUN_RETURN_IF_ERROR(SameJobSettings(run, joiner));
  std::map<std::string, std::string> ours = SettingsAsText(run);
  absl::Status differs;
  ForEachSetting(joiner, [&](const SettingField& field, const auto& value) {
    const std::string theirs = SettingText(value);
    if (!differs.ok() || field.agreement != Agreement::kEveryNode || theirs == ours[field.name]) {
      return;
    }
    differs = absl::FailedPreconditionError(absl::StrCat(
        "this node was started with ", OptionOf(field), "=", theirs, " but the run's master uses ",
        ours[field.name], ": start every node with the same values"));
  });
  return differs;
}

}  // namespace ddprun
