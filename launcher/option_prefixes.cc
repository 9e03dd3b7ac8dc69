#include "launcher/option_prefixes.h"

#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/closest_name.h"

namespace ddprun {
namespace {

// The spelling an expanded prefix is written as: the option's first long one.
const std::string& LongName(const KnownOption& option) {
  for (const std::string& spelling : option.spellings) {
    if (absl::StartsWith(spelling, "--")) return spelling;
  }
  return option.spellings.front();
}

const KnownOption* Exact(const std::string& name, const std::vector<KnownOption>& options) {
  for (const KnownOption& option : options) {
    if (std::find(option.spellings.begin(), option.spellings.end(), name) !=
        option.spellings.end()) {
      return &option;
    }
  }
  return nullptr;
}

std::vector<const KnownOption*> Starting(const std::string& prefix,
                                         const std::vector<KnownOption>& options) {
  std::vector<const KnownOption*> out;
  for (const KnownOption& option : options) {
    for (const std::string& spelling : option.spellings) {
      if (absl::StartsWith(spelling, "--") && absl::StartsWith(spelling, prefix)) {
        out.push_back(&option);
        break;
      }
    }
  }
  return out;
}

// The one option `prefix` names, null when none does, or why it names several.
absl::StatusOr<const KnownOption*> Resolve(const std::string& prefix,
                                           const std::vector<KnownOption>& options) {
  std::vector<const KnownOption*> candidates = Starting(prefix, options);
  if (candidates.size() <= 1) return candidates.empty() ? nullptr : candidates.front();
  std::vector<const KnownOption*> torchruns;
  for (const KnownOption* option : candidates) {
    if (option->torchrun) torchruns.push_back(option);
  }
  if (torchruns.size() == 1) return torchruns.front();
  std::vector<std::string> names;
  for (const KnownOption* option : candidates) names.push_back(LongName(*option));
  return absl::InvalidArgumentError(absl::StrCat("ambiguous option: ", prefix, " could match ",
                                                 absl::StrJoin(names, ", "),
                                                 "; write more of its name"));
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandOptionPrefixes(
    const std::vector<std::string>& args, const std::vector<KnownOption>& options) {
  std::vector<std::string> out = args;
  for (size_t i = 0; i < out.size(); ++i) {
    std::string& arg = out[i];
    if (arg == "--" || !absl::StartsWith(arg, "-") || arg == "-") break;  // the script
    if (!absl::StartsWith(arg, "--")) {  // -r 3, -r3, -m: short options are never prefixes
      const KnownOption* option = Exact(arg, options);
      if (option != nullptr && option->takes_value) ++i;
      continue;
    }
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(0, equals);
    if (name.size() <= 2) break;  // "--=x": no name at all; the parser says so
    const KnownOption* option = Exact(name, options);
    if (option == nullptr) {
      absl::StatusOr<const KnownOption*> resolved = Resolve(name, options);
      if (!resolved.ok()) return resolved.status();
      if (*resolved == nullptr) break;  // unknown: the parser says so
      option = *resolved;
      arg = absl::StrCat(LongName(*option), equals == std::string::npos ? "" : arg.substr(equals));
    }
    if (!option->launch_era_hint.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " is an option of torch.distributed.launch, not of torchrun or ddprun: ",
          option->launch_era_hint));
    }
    if (option->takes_value && equals == std::string::npos) ++i;
  }
  return out;
}

std::string ClosestOption(const std::string& unknown, const std::vector<KnownOption>& options) {
  const std::string name = unknown.substr(0, unknown.find('='));
  if (!absl::StartsWith(name, "--")) return "";
  std::vector<std::string> spellings;
  std::map<std::string, const KnownOption*> owner;
  for (const KnownOption& option : options) {
    if (!option.launch_era_hint.empty()) continue;  // never suggested
    for (const std::string& spelling : option.spellings) {
      if (!absl::StartsWith(spelling, "--")) continue;
      spellings.push_back(spelling);
      owner.emplace(spelling, &option);
    }
  }
  // Close enough to be a typo: one edit in a short name, one in four in a longer one.
  const std::string closest =
      ClosestName(name, spellings, std::max<size_t>(1, (name.size() - 2) / 4));
  return closest.empty() ? "" : LongName(*owner.at(closest));
}

}  // namespace ddprun
