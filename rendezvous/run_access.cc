#include "rendezvous/run_access.h"

#include "absl/strings/str_cat.h"

namespace ddprun {

absl::Status CheckRunId(absl::string_view run_id, absl::string_view what) {
  const auto refuse = [&](absl::string_view why) {
    std::string shown(run_id.substr(0, 64));
    for (char& c : shown) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    }
    return absl::InvalidArgumentError(
        absl::StrCat(what, "='", shown, run_id.size() > 64 ? "..." : "", "' is not valid: ", why,
                     " (a run id is 1-", kMaxRunIdBytes,
                     " bytes, without '/' or control characters, and not '.' or '..')"));
  };
  if (run_id.empty()) return refuse("it is empty");
  if (run_id.size() > kMaxRunIdBytes) {
    return refuse(absl::StrCat("it has ", run_id.size(), " bytes"));
  }
  if (run_id == "." || run_id == "..") return refuse("it names a folder's parent or itself");
  for (char c : run_id) {
    if (c == '/') return refuse("it contains '/'");
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return refuse("it contains a control character");
    }
  }
  return absl::OkStatus();
}

bool TokensMatch(absl::string_view expected, absl::string_view given) {
  // Every byte of `given` is compared against some byte of `expected`, so the time taken
  // says nothing about how much of it was right.
  if (expected.empty()) return given.empty();
  unsigned char diff = expected.size() == given.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ expected[i % expected.size()]);
  }
  return diff == 0;
}

absl::Status CheckToken(absl::string_view expected, absl::string_view given, absl::string_view what,
                        absl::string_view fix) {
  if (expected.empty() || TokensMatch(expected, given)) return absl::OkStatus();
  return absl::PermissionDeniedError(
      given.empty() ? absl::StrCat("this master requires a ", what, " and none was given: ", fix)
                    : absl::StrCat("the ", what, " does not match the master's: ", fix));
}

std::string NoTokenWarning(int port, absl::string_view how_to_set) {
  // One short line at every launch: what it means and what to do are in docs/security.md.
  return absl::StrCat("the rendezvous master on port ", port,
                      " has no token: anyone who reaches it can join or end the run; ", how_to_set,
                      " (docs/security.md)");
}

}  // namespace ddprun
