#pragma once
// Who may touch a run: the rules for run ids (one set for the CLI, joins, Store calls and
// log folders) and the token check. Pure.

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace ddprun {

/// The gRPC metadata key that carries the token on Store calls (joins carry it in the
/// Join message).
inline constexpr char kTokenMetadataKey[] = "ddprun-token";

/// The longest run id anything accepts.
inline constexpr size_t kMaxRunIdBytes = 256;

/// InvalidArgument naming `what` (e.g. "--rdzv-id") unless `run_id` is 1-256 bytes with no
/// '/', no control character, and is not "." or "..": it becomes a folder name under
/// --log-dir and appears in log lines.
absl::Status CheckRunId(absl::string_view run_id, absl::string_view what);

/// Whether `given` equals `expected`, in time that depends on their lengths only (not on
/// where they first differ).
bool TokensMatch(absl::string_view expected, absl::string_view given);

/// OK when the master has no token or `given` matches it; else PermissionDenied naming the
/// token as `what` ("join token") and saying `fix`.
absl::Status CheckToken(absl::string_view expected, absl::string_view given, absl::string_view what,
                        absl::string_view fix);

/// What a master without a token that listens beyond loopback says once, at warning level:
/// what anyone who reaches `port` can do, and `how_to_set` a token.
std::string NoTokenWarning(int port, absl::string_view how_to_set);

}  // namespace ddprun
